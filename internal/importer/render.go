package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/converge-pve/converge/events"
)

// Formats Render writes.
const (
	YAML = "yaml"
	JSON = "json"
)

// Render writes the import as {guests: [...]}, input for `converge desire
// -f` as it is. YAML says each guest's notes as comments above it; JSON,
// which has no comments, leaves them to notes (the caller prints them on
// stderr). The output depends only on the guests: importing again what
// was published gives the same bytes.
func Render(w io.Writer, res *Result, format string, notes io.Writer) error {
	switch format {
	case JSON:
		for _, g := range res.Guests {
			for _, n := range g.Notes {
				fmt.Fprintf(notes, "%d: %s\n", g.Desired.VMID, n)
			}
		}
		for _, s := range res.Skipped {
			fmt.Fprintf(notes, "skipped %s\n", s)
		}
		type doc struct {
			Guests []events.Desired `json:"guests"`
		}
		ds := make([]events.Desired, len(res.Guests))
		for i, g := range res.Guests {
			ds[i] = g.Desired
		}
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(doc{Guests: ds})
	case YAML, "":
	default:
		return fmt.Errorf("unknown output format %q (yaml or json)", format)
	}
	var b bytes.Buffer
	b.WriteString("# converge import: desired states equal to what Proxmox has (docs/import.md).\n")
	b.WriteString("# Review, then publish with `converge desire -f FILE`; `converge plan -f FILE` shows what it would do.\n")
	for _, s := range res.Skipped {
		fmt.Fprintf(&b, "# skipped %s\n", comment(s))
	}
	b.WriteString("guests:\n")
	for _, g := range res.Guests {
		y, err := yaml.Marshal(g.Desired)
		if err != nil {
			return fmt.Errorf("guest %d: %w", g.Desired.VMID, err)
		}
		for _, n := range g.Notes {
			fmt.Fprintf(&b, "  # %d: %s\n", g.Desired.VMID, comment(n))
		}
		// vmid first, where a reader looks for it (the encoder sorts keys).
		id := fmt.Sprintf("vmid: %d", g.Desired.VMID)
		lines := []string{id}
		for _, line := range strings.Split(strings.TrimRight(string(y), "\n"), "\n") {
			if line != id {
				lines = append(lines, line)
			}
		}
		for i, line := range lines {
			if i == 0 {
				b.WriteString("  - ")
			} else {
				b.WriteString("    ")
			}
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	if len(res.Guests) == 0 {
		b.Reset()
		b.WriteString("# converge import: no guest selected\n")
		for _, s := range res.Skipped {
			fmt.Fprintf(&b, "# skipped %s\n", comment(s))
		}
		b.WriteString("guests: []\n")
	}
	_, err := w.Write(b.Bytes())
	return err
}

// comment is s on one line.
func comment(s string) string {
	return strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(s)
}
