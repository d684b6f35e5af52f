package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/importer"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/secret"
	"github.com/converge-pve/converge/internal/views"
)

// annotYAML marks the commands that also print YAML (-o yaml).
const annotYAML = "converge/yaml"

type importFlags struct {
	sel      importer.Selection
	observed bool
	px       roleFlags // its Proxmox settings only
}

func newImportCmd(g *globals) *cobra.Command {
	f := &importFlags{}
	f.px.pve = pve.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "import [VMID... | --all | --node N | --pool P | --tag T] [-o yaml|json]",
		Short: "Write desired states equal to what Proxmox has now (input for desire -f)",
		Long: `Reads the selected guests from Proxmox and writes, for each, the desired
state that converge's planner reads as no drift: power (from the HA state
for HA-managed guests), kind, name, description, tags, onboot, cores,
memory, node, pool, disks, network interfaces and cloud-init. Pending
changes are written as the desired values with restart: never. A field a
desired state cannot hold exactly is left out with a comment saying why
(-o json: on stderr). Templates are left out unless --templates; guests
that already have a desired state keep it unless --observed.
Publishing the output unchanged (converge desire -f) changes nothing in
Proxmox. See docs/import.md.`,
		Annotations: map[string]string{annotYAML: "yes"},
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseVMIDs(args)
			if err != nil {
				return usageError{err}
			}
			f.sel.VMIDs = ids
			if f.sel.Empty() {
				return usageError{errors.New("say which guests: VMIDs, --all, --node, --pool or --tag")}
			}
			format := importer.YAML
			switch g.output {
			case "json":
				format = importer.JSON
			case "text", "yaml":
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			if err := f.px.proxmox(log); err != nil {
				return err
			}
			cfg := f.px.pve
			cfg.Logger = log
			px, err := pve.New(cfg)
			if err != nil {
				return usageError{err}
			}
			ctx := cmd.Context()
			res, err := importer.Read(ctx, px, f.sel, time.Now())
			if err != nil {
				return err
			}
			if !f.observed {
				if err := keepManaged(ctx, g, res); err != nil {
					return err
				}
			}
			return importer.Render(cmd.OutOrStdout(), res, format, cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.sel.All, "all", false, "every guest of the cluster")
	fl.StringVar(&f.sel.Node, "node", "", "the guests on this node")
	fl.StringVar(&f.sel.Pool, "pool", "", "the guests in this resource pool")
	fl.StringVar(&f.sel.Tag, "tag", "", "the guests with this tag")
	fl.BoolVar(&f.sel.Templates, "templates", false, "include templates (converge does not manage them: their status shows an error)")
	fl.BoolVar(&f.observed, "observed", false, "import what Proxmox shows for guests that already have a desired state too (default: keep theirs; without it the views are read over NATS)")
	fl.StringVar(&f.px.pve.URL, "pve-url", "", "Proxmox VE API URL, e.g. https://pve1:8006")
	fl.StringVar(&f.px.pve.TokenID, "pve-token-id", "", "API token id user@realm!name")
	f.px.pveSecret = secret.Flag{Name: "pve-token-secret", Env: "CONVERGE_PVE_TOKEN_SECRET", Usage: "API token secret"}
	f.px.pveSecret.Register(fl)
	f.px.flags = fl
	fl.StringVar(&f.px.pve.Fingerprint, "pve-fingerprint", "", "pin the Proxmox certificate's SHA-256 fingerprint")
	fl.StringVar(&f.px.pve.CAFile, "pve-ca", "", "CA file for the Proxmox certificate")
	fl.BoolVar(&f.px.pve.Insecure, "pve-insecure", false, "do not verify the Proxmox certificate (dangerous)")
	fl.DurationVar(&f.px.pve.Timeout, "pve-timeout", f.px.pve.Timeout, "timeout of one Proxmox API request")
	return cmd
}

// keepManaged keeps the current desired state of each guest that has
// one, read from the planner's views.
func keepManaged(ctx context.Context, g *globals, res *importer.Result) error {
	b, r, err := openViews(ctx, g, "converge-import")
	if err != nil {
		return fmt.Errorf("reading which guests converge manages already: %w (--observed imports without reading them)", err)
	}
	defer b.Close()
	return importer.KeepManaged(res, func(vmid int) (*events.Desired, uint64, error) {
		return currentDesired(ctx, r, vmid)
	})
}

func currentDesired(ctx context.Context, r views.Reader, vmid int) (*events.Desired, uint64, error) {
	doc, err := r.Guest(ctx, vmid)
	if err != nil || doc == nil || doc.View == nil || doc.View.Desired == nil {
		return nil, 0, err
	}
	return doc.View.Desired, doc.View.DesiredSeq, nil
}
