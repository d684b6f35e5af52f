package events_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/converge-pve/converge/events"
)

// schemaNode is the part of a JSON Schema these tests compare with Go.
type schemaNode struct {
	Type     string   `json:"type"`
	Enum     []any    `json:"enum"`
	Required []string `json:"required"`
	// AdditionalProperties is false, or the schema of a map's values.
	AdditionalProperties json.RawMessage       `json:"additionalProperties"`
	Properties           map[string]schemaNode `json:"properties"`
	Items                *schemaNode           `json:"items"`
}

// mapValues is the schema of an object's values (additionalProperties).
func mapValues(t *testing.T, n schemaNode) schemaNode {
	t.Helper()
	var v schemaNode
	if err := json.Unmarshal(n.AdditionalProperties, &v); err != nil {
		t.Fatalf("additionalProperties is not a schema: %v", err)
	}
	return v
}

func loadSchema(t *testing.T) schemaNode {
	t.Helper()
	var s schemaNode
	if err := json.Unmarshal(events.Schema, &s); err != nil {
		t.Fatalf("events.Schema is not JSON: %v", err)
	}
	return s
}

// jsonFields lists a struct's JSON field names and whether each is
// required (its tag has no omitempty/omitzero).
func jsonFields(t *testing.T, typ reflect.Type) map[string]reflect.StructField {
	t.Helper()
	out := map[string]reflect.StructField{}
	for f := range typ.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			t.Fatalf("%s.%s has no json tag: the schema contract needs explicit names", typ.Name(), f.Name)
		}
		out[name] = f
	}
	return out
}

func optional(f reflect.StructField) bool {
	_, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
	return slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// schemaType is the JSON Schema type a Go field must have.
func schemaType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint, reflect.Uint64:
		return "integer"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Float64:
		return "number"
	case reflect.Slice:
		return "array"
	case reflect.Struct, reflect.Map:
		return "object"
	}
	return "unsupported Go kind " + t.Kind().String()
}

// TestSchemaInStepWithGoTypes fails when a field is added to, removed from
// or retyped in the schema or the Go types but not in both.
func TestSchemaInStepWithGoTypes(t *testing.T) {
	root := loadSchema(t)
	cases := []struct {
		name   string
		schema schemaNode
		typ    reflect.Type
	}{
		{"desired", root, reflect.TypeFor[events.Desired]()},
		{"clone", root.Properties["clone"], reflect.TypeFor[events.Clone]()},
		{"cloudinit", root.Properties["cloudinit"], reflect.TypeFor[events.CloudInit]()},
		{"disks", mapValues(t, root.Properties["disks"]), reflect.TypeFor[events.DiskWant]()},
		{"net", mapValues(t, root.Properties["net"]), reflect.TypeFor[events.NetWant]()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.schema.Type != "object" {
				t.Fatalf("schema type %q, want object", c.schema.Type)
			}
			if string(c.schema.AdditionalProperties) != "false" {
				t.Error(`schema must say "additionalProperties": false (unknown fields are rejected)`)
			}
			fields := jsonFields(t, c.typ)
			if got, want := sortedKeys(c.schema.Properties), sortedKeys(fields); !slices.Equal(got, want) {
				t.Fatalf("schema properties %v\n        Go %s fields %v", got, c.typ.Name(), want)
			}
			var goRequired []string
			for name, f := range fields {
				if !optional(f) {
					goRequired = append(goRequired, name)
				}
			}
			slices.Sort(goRequired)
			schemaRequired := slices.Sorted(slices.Values(c.schema.Required))
			if !slices.Equal(schemaRequired, goRequired) {
				t.Errorf("schema required %v, Go fields without omitempty %v", schemaRequired, goRequired)
			}
			for name, f := range fields {
				p := c.schema.Properties[name]
				want := schemaType(f.Type)
				switch {
				case p.Enum != nil:
					if want != "string" {
						t.Errorf("%s: enum in the schema but Go type %s", name, f.Type)
					}
					for _, v := range p.Enum {
						if _, ok := v.(string); !ok {
							t.Errorf("%s: enum value %v is not a string", name, v)
						}
					}
				case p.Type != want:
					t.Errorf("%s: schema type %q, Go type %s wants %q", name, p.Type, f.Type, want)
				}
				if want == "array" {
					if p.Items == nil || p.Items.Type != schemaType(derefType(f.Type).Elem()) {
						t.Errorf("%s: schema items %+v do not match Go element type %s", name, p.Items, derefType(f.Type).Elem())
					}
				}
			}
		})
	}
}

func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// goConstants reads the package source for every string constant of a
// named type, so that adding a constant without updating the schema fails.
func goConstants(t *testing.T, typeName string) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var out []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				id, ok := vs.Type.(*ast.Ident)
				if !ok || id.Name != typeName {
					continue
				}
				for _, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("constant of %s is not a string literal: %T", typeName, v)
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, s)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func TestSchemaEnumsEqualGoConstants(t *testing.T) {
	root := loadSchema(t)
	cases := []struct {
		field    string
		typeName string
		known    []string // the constants this test names, as a cross-check of the parser
	}{
		{"kind", "GuestKind", []string{string(events.QEMU), string(events.LXC)}},
		{"power", "Power", []string{string(events.PowerRunning), string(events.PowerStopped)}},
	}
	for _, c := range cases {
		t.Run(c.field, func(t *testing.T) {
			var enum []string
			for _, v := range root.Properties[c.field].Enum {
				enum = append(enum, v.(string))
			}
			slices.Sort(enum)
			consts := goConstants(t, c.typeName)
			if !slices.Equal(enum, consts) {
				t.Fatalf("schema %s enum %v, Go %s constants %v", c.field, enum, c.typeName, consts)
			}
			known := slices.Sorted(slices.Values(c.known))
			if !slices.Equal(known, consts) {
				t.Fatalf("parsed %s constants %v, test names %v", c.typeName, consts, known)
			}
		})
	}
}

// TestSchemaAcceptsWhatGoMarshals: a fully populated Desired, marshalled by
// Go, passes the schema, so no Go field is left out of it under another name.
func TestSchemaAcceptsWhatGoMarshals(t *testing.T) {
	kind, power, cores, mem, name, desc, onboot, full := events.QEMU, events.PowerRunning, 2, 2048, "web-1", "notes", true, true
	tags := []string{"a"}
	d := events.Desired{VMID: 101, Kind: &kind, Power: &power, Cores: &cores, MemoryMiB: &mem, Name: &name,
		Description: &desc, Tags: &tags, OnBoot: &onboot, Restart: ptrTo(events.RestartAllowed),
		Clone: &events.Clone{From: 9000, Node: "pve1", Full: &full, Storage: "local-lvm"},
		Node:  ptrTo("pve2"), Pool: ptrTo("prod"), SnapshotBefore: []string{"restart", "resize"}, Set: "web",
		Disks: map[string]events.DiskWant{"scsi0": {SizeGiB: 32}, "scsi1": {SizeGiB: 8, Storage: "local-lvm"}},
		Net:   map[string]events.NetWant{"net0": {Model: "virtio", Bridge: "vmbr0", Tag: ptrTo(10), Firewall: ptrTo(true), Rate: ptrTo(12.5), MTU: ptrTo(1500)}},
		CloudInit: &events.CloudInit{User: ptrTo("ops"), SSHKeys: &[]string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB ops@host"},
			IPConfig: map[string]string{"ipconfig0": "ip=10.0.0.5/24,gw=10.0.0.1"}, Nameserver: ptrTo("10.0.0.1 1.1.1.1"),
			SearchDomain: ptrTo("example.com"), Custom: ptrTo("user=local:snippets/user.yaml")}}
	body, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var asMap map[string]any
	if err := json.Unmarshal(body, &asMap); err != nil {
		t.Fatal(err)
	}
	fields := jsonFields(t, reflect.TypeFor[events.Desired]())
	delete(fields, "absent") // excludes every other field; covered below
	for name := range fields {
		if _, ok := asMap[name]; !ok {
			t.Fatalf("populated Desired did not marshal %q: %s", name, body)
		}
	}
	if _, err := events.DecodeDesired(body, 101); err != nil {
		t.Fatalf("schema rejects what Go marshals: %v\n%s", err, body)
	}
	absent := events.Desired{VMID: 101, Kind: &kind, Absent: true}
	if err := absent.Validate(101); err != nil {
		t.Fatalf("absent with kind: %v", err)
	}
}

func ptrTo[T any](v T) *T { return &v }
