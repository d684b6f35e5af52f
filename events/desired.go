package events

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
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
}

// Clone says how to create a missing guest.
type Clone struct {
	From    int    `json:"from"`
	Node    string `json:"node,omitempty"`
	Full    *bool  `json:"full,omitempty"`
	Storage string `json:"storage,omitempty"`
}

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

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "invalid desired event: " + strings.Join(parts, "; ")
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
// subject of subjectVMID (0 skips the subject check). Every problem is
// reported in a *ValidationError.
func DecodeDesired(body []byte, subjectVMID int) (*Desired, error) {
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
		return nil, &ValidationError{Problems: problems}
	}
	var d Desired
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, &ValidationError{Problems: []FieldError{{Message: err.Error()}}}
	}
	if err := d.check(subjectVMID); err != nil {
		return nil, err
	}
	return &d, nil
}

// Validate checks a desired state built in Go before it is published.
func (d *Desired) Validate(subjectVMID int) error {
	body, err := json.Marshal(d)
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
		d.Description != nil || d.Tags != nil || d.OnBoot != nil || d.Clone != nil) {
		p = append(p, FieldError{"absent", "an absent guest cannot also have power, config or clone fields"})
	}
	if d.Clone != nil && d.Clone.From == d.VMID {
		p = append(p, FieldError{"clone.from", "a guest cannot be cloned from itself"})
	}
	if len(p) > 0 {
		return &ValidationError{Problems: p}
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
		if len(e.Causes) == 0 {
			field := strings.Join(e.InstanceLocation, ".")
			msg := e.ErrorKind.LocalizedString(printer)
			if !seen[field+msg] {
				seen[field+msg] = true
				out = append(out, FieldError{Field: field, Message: msg})
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Slice(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	return out
}

// Managed reports whether the event manages anything beyond existence.
func (d *Desired) Managed() bool {
	return d.Power != nil || d.Cores != nil || d.MemoryMiB != nil || d.Name != nil ||
		d.Description != nil || d.Tags != nil || d.OnBoot != nil
}
