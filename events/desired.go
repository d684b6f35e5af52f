package events

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// GuestKind is a Proxmox guest type.
type GuestKind string

// Guest types.
const (
	QEMU GuestKind = "qemu"
	LXC  GuestKind = "lxc"
)

// Power is a desired power state.
type Power string

// Power states a desired event may ask for.
const (
	PowerRunning Power = "running"
	PowerStopped Power = "stopped"
)

// Restart is whether converge may restart a guest to apply changes that
// Proxmox keeps pending until a restart.
type Restart string

// Restart policies a desired event may ask for.
const (
	RestartNever   Restart = "never"
	RestartAllowed Restart = "allowed"
)

// Desired is the body of a desired event, schema version 1. Pointer fields
// are nil when the event does not manage them.
type Desired struct {
	VMID        int        `json:"vmid"`
	Kind        *GuestKind `json:"kind,omitempty"`
	Power       *Power     `json:"power,omitempty"`
	Cores       *int       `json:"cores,omitempty"`
	MemoryMiB   *int       `json:"memory_mib,omitempty"`
	Name        *string    `json:"name,omitempty"`
	Description *string    `json:"description,omitempty"`
	Tags        *[]string  `json:"tags,omitempty"`
	OnBoot      *bool      `json:"onboot,omitempty"`
	Absent      bool       `json:"absent,omitempty"`
	Clone       *Clone     `json:"clone,omitempty"`
	// Restart overrides the deployment's restart policy (--restart) for
	// this guest.
	Restart *Restart `json:"restart,omitempty"`
	// Node is the node the guest should run on: a guest elsewhere is
	// migrated there. Without it the guest is followed wherever it runs.
	Node *string `json:"node,omitempty"`
	// Disks maps disk keys (scsi0, virtio1, rootfs, mp0, …) to their
	// desired size (and a new disk's storage).
	Disks map[string]DiskWant `json:"disks,omitempty"`
	// Net maps interface keys (net0, …) to their desired settings.
	Net map[string]NetWant `json:"net,omitempty"`
	// CloudInit is a VM's cloud-init settings.
	CloudInit *CloudInit `json:"cloudinit,omitempty"`
	// Pool is the resource pool the guest belongs to ("" for none).
	Pool *string `json:"pool,omitempty"`
	// SnapshotBefore names the actions (restart, migrate, resize) that a
	// Proxmox snapshot of the guest precedes.
	SnapshotBefore []string `json:"snapshot_before,omitempty"`
	// Set is the set the guest was published in (converge desire -f FILE
	// --set NAME): a guest belongs to one set at a time, and a --prune
	// publish of the set releases its members missing from the file. It
	// manages nothing in Proxmox.
	Set string `json:"set,omitempty"`
}

// MaxSetBytes is the longest set name.
const MaxSetBytes = 63

// SetHint says in words what a set name may be.
const SetHint = "a set name is 1 to 63 characters: lower-case letters, digits and '-', '_', '.', starting and ending with a letter or digit"

// Clone says how to create a missing guest: a clone of template From.
type Clone struct {
	From    int    `json:"from"`
	Node    string `json:"node,omitempty"`
	Full    *bool  `json:"full,omitempty"`
	Storage string `json:"storage,omitempty"`
	Pool    string `json:"pool,omitempty"`
}

// IsFull reports whether the clone copies the disks (Full set and true);
// otherwise it is linked, as Proxmox clones a template by default.
func (c *Clone) IsFull() bool { return c.Full != nil && *c.Full }

// Schema is the JSON Schema of the desired event body.
//
//go:embed desired.schema.json
var Schema []byte

// FieldError is one problem with a desired event.
type FieldError struct {
	Field   string `json:"field"` // "cores", "clone.from", "" for the body as a whole
	Message string `json:"message"`
}

func (f FieldError) String() string {
	if f.Field == "" {
		return f.Message
	}
	return f.Field + ": " + f.Message
}

// ValidationError lists every problem found with a desired event.
type ValidationError struct {
	Problems []FieldError
}

// Error lists the problems, at most MaxProblems of them each cut to a
// couple of hundred bytes, in at most MaxReasonBytes: it becomes the
// reason a rejected guest's status shows.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("invalid desired event: ")
	ps := capProblems(e.Problems)
	for i, p := range ps {
		if i > 0 {
			b.WriteString("; ")
		}
		if p.Field != "" {
			b.WriteString(truncate(p.Field, maxProblemBytes/2))
			b.WriteString(": ")
		}
		b.WriteString(truncate(p.Message, maxProblemBytes))
		if b.Len() > MaxReasonBytes {
			break
		}
	}
	return TruncateReason(b.String())
}

var compiled = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("desired.schema.json", doc); err != nil {
		return nil, err
	}
	return c.Compile("desired.schema.json")
})

// DecodeDesired parses and validates a desired event body published on the
// subject of subjectVMID (0 skips the subject check). Problems are
// reported in a *ValidationError: a body over MaxDesiredBytes is refused
// unread; a key given twice, invalid UTF-8 or anything but one JSON value
// is refused before the schema runs; otherwise every problem is found and
// the first MaxProblems kept.
func DecodeDesired(body []byte, subjectVMID int) (*Desired, error) {
	if err := checkSize(body); err != nil {
		return nil, err
	}
	if d, ok := fastDecode(body); ok { // strict by itself
		if err := d.check(subjectVMID); err != nil {
			return nil, err
		}
		return d, nil
	}
	if err := checkStrict(body); err != nil {
		return nil, err
	}
	sch, err := compiled()
	if err != nil {
		return nil, fmt.Errorf("events: desired schema: %w", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return nil, &ValidationError{Problems: []FieldError{{Message: "body is not valid JSON: " + err.Error()}}}
	}
	var problems []FieldError
	if err := sch.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return nil, err
		}
		problems = schemaProblems(ve)
	}
	if len(problems) > 0 {
		return nil, &ValidationError{Problems: capProblems(problems)}
	}
	var d Desired
	if err := json.Unmarshal(body, &d, strictOptions); err != nil {
		// The schema counts 1.01e2 and 101.0 as integers; Go does not.
		var se *json.SemanticError
		if errors.As(err, &se) && se.JSONPointer != "" && se.JSONKind == '0' {
			return nil, &ValidationError{Problems: []FieldError{{pointerField(se.JSONPointer), "must be a plain integer, got number " + string(se.JSONValue)}}}
		}
		return nil, &ValidationError{Problems: []FieldError{{Message: err.Error()}}}
	}
	if err := d.check(subjectVMID); err != nil {
		return nil, err
	}
	return &d, nil
}

// Validate checks a desired state built in Go before it is published.
func (d *Desired) Validate(subjectVMID int) error {
	body, err := Encode(d)
	if err != nil {
		return err
	}
	_, err = DecodeDesired(body, subjectVMID)
	return err
}

// check holds the rules JSON Schema cannot express.
func (d *Desired) check(subjectVMID int) error {
	var p []FieldError
	if subjectVMID != 0 && d.VMID != subjectVMID {
		p = append(p, FieldError{"vmid", fmt.Sprintf("body says %d but the subject is for %d", d.VMID, subjectVMID)})
	}
	if d.Absent && (d.Power != nil || d.Cores != nil || d.MemoryMiB != nil || d.Name != nil ||
		d.Description != nil || d.Tags != nil || d.OnBoot != nil || d.Clone != nil || d.Restart != nil ||
		d.Node != nil || d.Disks != nil || d.Net != nil || d.CloudInit != nil || d.Pool != nil || d.SnapshotBefore != nil) {
		p = append(p, FieldError{"absent", "an absent guest cannot also have power, config, clone, restart, node, disks, net, cloudinit, pool or snapshot_before fields"})
	}
	p = append(p, d.checkWhole()...)
	p = append(p, d.checkProxmox()...)
	if d.Clone != nil && d.Clone.From == d.VMID {
		p = append(p, FieldError{"clone.from", "a guest cannot be cloned from itself"})
	}
	if d.Clone != nil && d.Clone.Storage != "" && !d.Clone.IsFull() {
		p = append(p, FieldError{"clone.storage", "only a full clone (\"full\": true) takes a storage: a linked clone stays on its template's storage"})
	}
	if len(p) > 0 {
		// Every NIC and ipconfig may add one: keep the reason bounded.
		return &ValidationError{Problems: capProblems(p)}
	}
	return nil
}

var printer = message.NewPrinter(language.English)

// schemaProblems flattens the schema library's error tree into one line per
// failing field, in a stable order.
func schemaProblems(ve *jsonschema.ValidationError) []FieldError {
	seen := map[string]bool{}
	var out []FieldError
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if k, ok := e.ErrorKind.(*kind.PropertyNames); ok {
			// The library locates neither the name nor its object: the
			// schema path does (#/properties/disks/propertyNames).
			_, frag, _ := strings.Cut(e.SchemaURL, "#")
			parent := strings.Join(slices.DeleteFunc(strings.Split(strings.TrimSuffix(frag, "/propertyNames"), "/"),
				func(s string) bool { return s == "" || s == "properties" }), ".")
			f := FieldError{strings.TrimPrefix(parent+"."+k.Property, "."), "unknown key: " + keyHints[parent]}
			if !seen[f.Field+"\x00"+f.Message] {
				seen[f.Field+"\x00"+f.Message] = true
				out = append(out, f)
			}
			return
		}
		if len(e.Causes) == 0 {
			for _, f := range describe(e) {
				if !seen[f.Field+"\x00"+f.Message] {
					seen[f.Field+"\x00"+f.Message] = true
					out = append(out, f)
				}
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Field != out[j].Field {
			return out[i].Field < out[j].Field
		}
		return out[i].Message < out[j].Message
	})
	return out
}

// patternHints say in words what a field's schema pattern accepts.
var patternHints = map[string]string{
	"name":          "must be a DNS name: letters, digits and '-', not starting or ending with '-', labels separated by '.'",
	"tags":          "a tag must start with a letter, digit or '_' and contain only letters, digits and '_', '+', '.', '-'",
	"clone.node":    "must be a node name: letters, digits and '-'",
	"clone.storage": storageHint,
	"clone.pool":    "must be a pool id: letters, digits and '_', '.', '-'",
	"set":           SetHint,
}

// storageHint is Proxmox's pve-storage-id (pve-common parse_id).
const storageHint = "must be a storage id: a letter, then letters, digits and '_', '.', '-', ending in a letter or digit (Proxmox format pve-storage-id)"

// keyHints say which keys an object of maps accepts.
var keyHints = map[string]string{
	"disks":              "disk keys are scsi0-30, virtio0-15, sata0-5, ide0-3, efidisk0, tpmstate0 (VMs), rootfs and mp0-255 (containers)",
	"net":                "interface keys are net0-net31",
	"cloudinit.ipconfig": "keys are ipconfig0-ipconfig31, one per net interface",
}

// describe turns one schema failure into problems that name the offending
// field (an unknown or missing property is named itself, not its parent)
// and read as a sentence rather than as schema keywords.
func describe(e *jsonschema.ValidationError) []FieldError {
	loc := e.InstanceLocation
	field := strings.Join(loc, ".")
	child := func(name string) string {
		return strings.Join(append(append([]string(nil), loc...), name), ".")
	}
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		out := make([]FieldError, 0, len(k.Properties))
		for _, p := range k.Properties {
			out = append(out, FieldError{child(p), "unknown field (not in desired schema version 1)"})
		}
		return out
	case *kind.Required:
		out := make([]FieldError, 0, len(k.Missing))
		for _, p := range k.Missing {
			out = append(out, FieldError{child(p), "is required"})
		}
		return out
	case *kind.Type:
		if field == "" {
			return []FieldError{{field, fmt.Sprintf("the body must be a JSON %s, got %s", strings.Join(k.Want, " or "), k.Got)}}
		}
		return []FieldError{{field, fmt.Sprintf("must be a JSON %s, got %s", strings.Join(k.Want, " or "), k.Got)}}
	case *kind.Minimum:
		return []FieldError{{field, fmt.Sprintf("must be at least %s, got %s", k.Want.RatString(), k.Got.RatString())}}
	case *kind.Maximum:
		return []FieldError{{field, fmt.Sprintf("must be at most %s, got %s", k.Want.RatString(), k.Got.RatString())}}
	case *kind.Pattern:
		hintKey := field
		if len(loc) == 2 && loc[0] == "tags" {
			hintKey = "tags"
		}
		if len(loc) == 3 && loc[0] == "disks" && loc[2] == "storage" {
			hintKey = "clone.storage"
		}
		if h, ok := patternHints[hintKey]; ok {
			return []FieldError{{field, fmt.Sprintf("%q: %s", k.Got, h)}}
		}
	}
	return []FieldError{{field, e.ErrorKind.LocalizedString(printer)}}
}

// Managed reports whether the event manages anything beyond existence.
func (d *Desired) Managed() bool {
	return d.Power != nil || d.Cores != nil || d.MemoryMiB != nil || d.Name != nil ||
		d.Description != nil || d.Tags != nil || d.OnBoot != nil ||
		d.Node != nil || d.Disks != nil || d.Net != nil || d.CloudInit != nil || d.Pool != nil
}

var setRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9_.-]*[a-z0-9])?$`)

// ValidSet checks a set name as the schema does (for a --set flag, before
// any file is read).
func ValidSet(name string) error {
	if len(name) == 0 || len(name) > MaxSetBytes || !setRe.MatchString(name) {
		return fmt.Errorf("set %q: %s", name, SetHint)
	}
	return nil
}
