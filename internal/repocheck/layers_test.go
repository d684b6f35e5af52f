package repocheck

import (
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
	// imports are the converge packages it may import directly; nil: any.
	imports []string
	// neverLinks are import-path prefixes none of its dependencies may have.
	neverLinks []string
}

// layers are the rules of docs/architecture.md.
var layers = []layer{
	// The public contract, the fold and the planner's decisions are pure.
	{pkg: "events", imports: []string{}, neverLinks: []string{natsServer, natsClient, goProxmox}},
	{pkg: "projector", imports: []string{"events"}, neverLinks: []string{natsServer, natsClient, goProxmox}},
	{pkg: "planner", imports: []string{"events", "projector"}, neverLinks: []string{natsServer, natsClient, goProxmox}},
	// The roles and their parts reach NATS through the journal's role
	// interfaces (internal/journal), implemented by internal/bus.
	{pkg: "executor", neverLinks: []string{natsServer, natsClient}},
	{pkg: "internal/planloop", neverLinks: []string{natsServer, natsClient, goProxmox}},
	{pkg: "internal/observer", neverLinks: []string{natsServer, natsClient}},
	{pkg: "internal/lease", neverLinks: []string{natsServer, natsClient, goProxmox}},
	{pkg: "internal/views", neverLinks: []string{natsServer, natsClient, goProxmox}},
	{pkg: "internal/control", neverLinks: []string{natsServer, natsClient, goProxmox}},
	{pkg: "internal/api", neverLinks: []string{natsServer, natsClient, goProxmox}},
	{pkg: "internal/journal", imports: []string{"events"}, neverLinks: []string{natsServer, natsClient, goProxmox}},
	{pkg: "internal/clock", imports: []string{}, neverLinks: []string{natsServer, natsClient, goProxmox}},
	// The NATS plumbing does not need the embedded server: a role that
	// connects to an external NATS does not link it.
	{pkg: "internal/bus", neverLinks: []string{natsServer, goProxmox}},
	// The Proxmox edge knows nothing of NATS.
	{pkg: "internal/pve", imports: []string{"events", "internal/pace"}, neverLinks: []string{natsServer, natsClient}},
}

// TestLayers fails when a package imports a converge package its layer
// does not allow, or links (even indirectly) a package it must not.
func TestLayers(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list packages with")
	}
	for _, l := range layers {
		cmd := exec.Command(goBin, "list", "-f", "{{join .Imports \"\\n\"}}\n--\n{{join .Deps \"\\n\"}}", "./"+l.pkg)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list ./%s: %v", l.pkg, err)
		}
		imports, deps, _ := strings.Cut(string(out), "\n--\n")
		if l.imports != nil {
			for _, imp := range strings.Fields(imports) {
				if rel, ok := strings.CutPrefix(imp, module); ok && !slices.Contains(l.imports, rel) {
					t.Errorf("%s imports %s; its layer allows only %v", l.pkg, rel, l.imports)
				}
			}
		}
		for _, dep := range strings.Fields(deps) {
			for _, bad := range l.neverLinks {
				if dep == bad || strings.HasPrefix(dep, bad+"/") {
					t.Errorf("%s links %s (through its dependencies): %s must stay out of its layer", l.pkg, dep, bad)
				}
			}
		}
	}
}
