package repocheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/converge-pve/converge/"

// Third-party packages that carry I/O converge keeps at its edges.
const (
	natsServer = "github.com/nats-io/nats-server/v2"
	natsClient = "github.com/nats-io/nats.go" // and its jetstream management API
	goProxmox  = "github.com/luthermonson/go-proxmox"
)

// layer is what one package may import of converge and must not link at
// all (directly or through any dependency).
type layer struct {
	pkg string
	// imports are the converge packages it may import directly; nil
	// (any): an assembly package, anything.
	imports []string
	// neverLinks are import-path prefixes none of its dependencies may have.
	neverLinks []string
	// stdlibOnly: it links nothing but the standard library (data and
	// generators other tools may vendor without pulling in converge's deps).
	stdlibOnly bool
}

// any is a layer's imports for an assembly package (cmd, app, bench):
// whatever converge has.
var any []string

// layers are the rules of docs/architecture.md, one row per package of the
// module (TestLayers fails for a package without one): what it may import
// of converge, and what it must never link.
var layers = []layer{
	// The public contract, the fold and the planner's decisions are pure.
	{pkg: "events", imports: []string{}, neverLinks: []string{natsServer, natsClient, goProxmox}},
	{pkg: "projector", imports: []string{"events"}, neverLinks: []string{natsServer, natsClient, goProxmox}},
	{pkg: "planner", imports: []string{"events", "projector"}, neverLinks: []string{natsServer, natsClient, goProxmox}},
	// The roles and their parts reach NATS through the journal's role
	// interfaces (internal/journal), implemented by internal/bus, and
	// Proxmox through internal/pve.
	{pkg: "executor", imports: []string{"events", "internal/clock", "internal/journal", "internal/lease", "internal/lograte",
		"internal/pve", "planner", "projector"}, neverLinks: []string{natsServer, natsClient}},
	{pkg: "internal/planloop", imports: []string{"events", "internal/clock", "internal/journal", "internal/lease",
		"internal/lograte", "internal/views", "planner", "projector"}, neverLinks: []string{natsServer, natsClient, goProxmox}},
	{pkg: "internal/observer", imports: []string{"events", "internal/clock", "internal/journal", "internal/pace", "internal/pve"},
		neverLinks: []string{natsServer, natsClient}},
	{pkg: "internal/lease", imports: []string{"internal/clock"}, neverLinks: []string{natsServer, natsClient, goProxmox}},
	{pkg: "internal/views", imports: []string{"events", "internal/clock", "internal/journal", "planner", "projector"},
		neverLinks: []string{natsServer, natsClient, goProxmox}},
	{pkg: "internal/control", imports: []string{"events", "internal/journal"}, neverLinks: []string{natsServer, natsClient, goProxmox}},
	{pkg: "internal/api", imports: []string{"events", "internal/console", "internal/control", "internal/journal", "internal/planfile", "internal/views"},
		neverLinks: []string{natsServer, natsClient, goProxmox}},
	// The operator console's pages: data from /v1 alone, in the browser.
	{pkg: "internal/console", imports: []string{}, stdlibOnly: true},
	// plan -f and POST /v1/plan: the planner's decisions on the views.
	{pkg: "internal/planfile", imports: []string{"events", "internal/views", "planner", "projector"},
		neverLinks: []string{natsServer, natsClient, goProxmox}},
	{pkg: "internal/revise", imports: []string{"events", "internal/control", "internal/journal", "internal/views"},
		neverLinks: []string{natsServer, natsClient, goProxmox}},
	{pkg: "internal/journal", imports: []string{"events"}, neverLinks: []string{natsServer, natsClient, goProxmox}},
	{pkg: "internal/clock", imports: []string{}, neverLinks: []string{natsServer, natsClient, goProxmox}},
	{pkg: "internal/pace", imports: []string{}, neverLinks: []string{natsServer, natsClient, goProxmox}},
	{pkg: "internal/lograte", imports: []string{}, neverLinks: []string{natsServer, natsClient, goProxmox}},
	{pkg: "internal/secret", imports: []string{}, neverLinks: []string{natsServer, natsClient, goProxmox}},
	// The NATS plumbing does not need the embedded server: a role that
	// connects to an external NATS does not link it.
	{pkg: "internal/bus", imports: []string{"events", "internal/journal", "internal/lease"}, neverLinks: []string{natsServer, goProxmox}},
	{pkg: "internal/natsserver", imports: []string{}, neverLinks: []string{goProxmox}},
	{pkg: "internal/natsauth", imports: []string{"events", "internal/bus", "internal/journal", "internal/lease", "internal/notify"}, neverLinks: []string{goProxmox}},
	// The notifier reads the views, leases and its own bucket (nats.go's
	// jetstream API: its own durable consumers) and posts to webhooks.
	{pkg: "internal/notify", imports: []string{"internal/control", "internal/journal", "internal/lease", "internal/planloop", "internal/views", "planner"},
		neverLinks: []string{natsServer, goProxmox}},
	// import reads Proxmox and checks its output with the planner.
	{pkg: "internal/importer", imports: []string{"events", "internal/pve", "planner", "projector"}, neverLinks: []string{natsServer, natsClient}},
	{pkg: "internal/audit", imports: []string{"events", "internal/bus", "projector"}, neverLinks: []string{natsServer, goProxmox}},
	// The Proxmox edge knows nothing of NATS; the simulator nothing of
	// converge but pacing and Proxmox's API schema (internal/pveschema).
	{pkg: "internal/pve", imports: []string{"events", "internal/pace"}, neverLinks: []string{natsServer, natsClient}},
	{pkg: "internal/pvesim", imports: []string{"internal/pace", "internal/pveschema"}, neverLinks: []string{natsServer, natsClient, goProxmox}},
	// Proxmox's API schema as data, and the generator that writes it from
	// pve-docs' apidata.js: the standard library only.
	{pkg: "internal/pveschema", imports: []string{}, stdlibOnly: true},
	{pkg: "internal/pveschema/gen", imports: []string{}, stdlibOnly: true},
	// Assembly: the one package that wires the roles, and its users.
	{pkg: "internal/app", imports: any},
	{pkg: "internal/bench", imports: any},
	{pkg: "cmd/converge", imports: any},
	// Test support: used only by tests.
	{pkg: "internal/bus/bustest", imports: []string{"internal/bus", "internal/natsserver"}},
	{pkg: "internal/bus/natscluster", imports: []string{}},
	{pkg: "internal/clock/clocktest", imports: []string{"internal/clock"}},
	{pkg: "internal/journal/journaltest", imports: []string{"events", "internal/journal"}},
	{pkg: "internal/lease/leasetest", imports: []string{"internal/clock", "internal/lease"}},
	{pkg: "internal/pvesim/pvesimtest", imports: []string{"internal/pve", "internal/pvesim"}},
	{pkg: "internal/scenario", imports: []string{}},
	{pkg: "deploy/compose/healthcheck", imports: []string{}},
}

// The packages of tests alone (no code but tests): nothing to layer.
var testOnly = []string{"e2e", "deploy", "internal/repocheck"}

// TestLayers fails when a package imports a converge package its layer
// does not allow, or links (even indirectly) a package it must not.
func TestLayers(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		// CI installs what the tests need: there a missing tool is a
		// failure (.ci/run sets CI=1); a developer's machine is told.
		if os.Getenv("CI") != "" {
			t.Fatal("no go command on PATH to list packages with: install Go 1.26 (https://go.dev/dl/) and put its bin/ on PATH")
		}
		t.Skip("SKIPPED: no go command on PATH to list packages with; install Go to run the layering test")
	}
	list := exec.Command(goBin, "list", "./...")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(pkg, module)
		if !slices.Contains(testOnly, rel) && !slices.ContainsFunc(layers, func(l layer) bool { return l.pkg == rel }) {
			t.Errorf("package %s has no row in layers: say what it may import", rel)
		}
	}
	for _, l := range layers {
		cmd := exec.Command(goBin, "list", "-f", "{{join .Imports \"\\n\"}}\n--\n{{join .Deps \"\\n\"}}", "./"+l.pkg)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list ./%s: %v", l.pkg, err)
		}
		imports, deps, _ := strings.Cut(string(out), "\n--\n")
		if l.imports != nil { // nil: an assembly package, any
			for _, imp := range strings.Fields(imports) {
				if rel, ok := strings.CutPrefix(imp, module); ok && !slices.Contains(l.imports, rel) {
					t.Errorf("%s imports %s; its layer allows only %v", l.pkg, rel, l.imports)
				}
			}
		}
		for _, dep := range strings.Fields(deps) {
			// A standard-library path has no dot in its first element.
			if first, _, _ := strings.Cut(dep, "/"); l.stdlibOnly && strings.Contains(first, ".") {
				t.Errorf("%s links %s: its layer allows only the standard library", l.pkg, dep)
			}
			for _, bad := range l.neverLinks {
				if dep == bad || strings.HasPrefix(dep, bad+"/") {
					t.Errorf("%s links %s (through its dependencies): %s must stay out of its layer", l.pkg, dep, bad)
				}
			}
		}
	}
}
