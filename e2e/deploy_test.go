package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/natsauth"
	"github.com/converge-pve/converge/internal/pvesim"
)

// TestShippedDeployment deploys converge as deploy/ ships it, as an
// operator following docs/operations.md would: nats-server (built from
// the pinned module) running deploy/nats's files unchanged, configured
// by its environment, one node and a three-node cluster on this host;
// `converge provision` as admin; observer, planner, two executors and
// `converge api` as separate processes, each under its own NATS user
// (issue 35). It checks that every role is ready within 10 s and logs no
// permission violation for 60 s; that desired state posted over HTTP and
// published as publisher both converge; that the auditor and the
// publisher cannot create, update or delete a consumer a role owns; and
// that a durable consumer deleted by admin is back within 10 s and its
// guest converges.
func TestShippedDeployment(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	bin := filepath.Join(t.TempDir(), "nats-server")
	build := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building nats-server: %v\n%s", err, out)
	}
	for _, nodes := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d-node", nodes), func(t *testing.T) {
			t.Parallel()
			d := &deployment{t: t, natsServer: bin, passwords: map[natsauth.Role]string{}}
			for _, r := range natsauth.Roles {
				d.passwords[r] = fmt.Sprintf("pw-%s-%d-0123456789abcdef", r, time.Now().UnixNano())
			}
			d.startNATS(nodes)
			d.run(nodes)
		})
	}
}

// deployment is one shipped deployment under test.
type deployment struct {
	t          *testing.T
	natsServer string
	passwords  map[natsauth.Role]string
	urls       string // the NATS client URLs, comma-separated
	sim        *pvesim.Sim
	roles      map[string]*roleProc
}

type roleProc struct {
	p       *proc
	http    string
	started time.Time
}

// natsEnv is what deploy/nats's files read from the environment, for one
// node: the passwords and the node's own settings.
func (d *deployment) natsEnv(own map[string]string) []string {
	var env []string
	for r, pw := range d.passwords {
		env = append(env, natsauth.PasswordVar(r)+"="+pw)
	}
	for k, v := range own {
		env = append(env, k+"="+v)
	}
	return env
}

// startNATS runs deploy/nats/converge.conf (one node) or cluster.conf
// (three nodes) unchanged, each node's settings from its environment and
// its client port chosen by itself (found in its ports file). A cluster's
// route ports are fixed in advance, as an operator's are.
func (d *deployment) startNATS(nodes int) {
	t := d.t
	conf := "converge.conf"
	var routes []string
	if nodes > 1 {
		conf = "cluster.conf"
		for range nodes {
			routes = append(routes, freeAddr(t))
		}
	}
	abs, err := filepath.Abs(filepath.Join("..", "deploy", "nats", conf))
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for i := range nodes {
		name := fmt.Sprintf("nats%d", i+1)
		own := map[string]string{"NATS_SERVER_NAME": name, "NATS_LISTEN": "127.0.0.1:-1", "NATS_STORE_DIR": t.TempDir()}
		if nodes > 1 {
			own["NATS_CLUSTER_LISTEN"] = routes[i]
			for j, r := range routes {
				own[fmt.Sprintf("NATS_ROUTE_%d", j+1)] = "nats-route://" + r
			}
		}
		portsDir := t.TempDir()
		p := startExe(t, name, d.natsServer, d.natsEnv(own), "-c", abs, "--ports_file_dir", portsDir)
		urls = append(urls, d.clientURL(p, portsDir))
	}
	d.urls = strings.Join(urls, ",")
}

// clientURL reads the client URL nats-server wrote to its ports file; a
// server that exits first fails the test with its log.
func (d *deployment) clientURL(p *proc, dir string) string {
	t := d.t
	var url string
	eventually(t, 30*time.Second, "nats-server's ports file", func() bool {
		select {
		case <-p.done:
			b, _ := os.ReadFile(p.log)
			t.Fatalf("nats-server exited (%v):\n%s", p.err, tail(string(b), 3000))
		default:
		}
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("nats-server_%d.ports", p.cmd.Process.Pid)))
		var ports struct {
			Nats []string `json:"nats"`
		}
		if err != nil || json.Unmarshal(b, &ports) != nil || len(ports.Nats) == 0 {
			return false
		}
		url = ports.Nats[0]
		return true
	})
	return url
}

// as is the environment of a converge process running as role.
func (d *deployment) as(role natsauth.Role) []string {
	return []string{"CONVERGE_NATS=" + d.urls, "CONVERGE_NATS_USER=" + string(role), "CONVERGE_NATS_PASSWORD=" + d.passwords[role],
		"CONVERGE_LOG_LEVEL=info"}
}

// cli runs a converge command as role and returns its output and exit
// code.
func (d *deployment) cli(role natsauth.Role, args ...string) (string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, converge, args...)
	cmd.Env = append(os.Environ(), d.as(role)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), ee.ExitCode()
	} else if err != nil {
		d.t.Fatal(err)
	}
	return out.String(), 0
}

// connect connects to NATS as role, sending what NATS refuses to denied.
func (d *deployment) connect(role natsauth.Role, denied chan<- string) *nats.Conn {
	opts := []nats.Option{nats.UserInfo(string(role), d.passwords[role])}
	if denied != nil {
		opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				select {
				case denied <- err.Error():
				default:
				}
			}
		}))
	}
	nc, err := nats.Connect(d.urls, opts...)
	if err != nil {
		d.t.Fatalf("connect as %s: %v", role, err)
	}
	d.t.Cleanup(nc.Close)
	return nc
}

const (
	deployToken   = "root@pam!deploy"
	deploySecret  = "deploy-secret-0123"
	deployAPIAuth = "portal-0123456789abcdef"
)

func (d *deployment) run(nodes int) {
	t := d.t
	replicas := strconv.Itoa(nodes)
	if out, code := d.cli(natsauth.Admin, "provision", "--replicas", replicas); code != 0 {
		t.Fatalf("provision as admin: exit %d\n%s", code, out)
	}
	sim, err := pvesim.New(pvesim.Options{Guests: 8, Nodes: 2, Tokens: map[string]string{deployToken: deploySecret}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	d.sim = sim
	tokens := filepath.Join(t.TempDir(), "http-tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens:\n  - {name: portal, scope: write, token: "+deployAPIAuth+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pve := []string{"--pve-url", sim.URL(), "--pve-token-id", deployToken}
	d.roles = map[string]*roleProc{}
	start := func(name string, role natsauth.Role, args ...string) {
		addr := freeAddr(t)
		env := d.as(role)
		if role == natsauth.Observer || role == natsauth.Executor {
			env = append(env, "CONVERGE_PVE_TOKEN_SECRET="+deploySecret)
		}
		args = append(args, "--name", name, "--replicas", replicas, "--http", addr)
		d.roles[name] = &roleProc{p: startExe(t, name, converge, env, args...), http: addr, started: time.Now()}
	}
	start("observer", natsauth.Observer, append([]string{"observer", "--observe-interval", "500ms"}, pve...)...)
	start("planner", natsauth.Planner, "planner")
	start("executor-1", natsauth.Executor, append([]string{"executor"}, pve...)...)
	start("executor-2", natsauth.Executor, append([]string{"executor"}, pve...)...)
	start("api", natsauth.API, "api", "--http-tokens", tokens)

	// Every role ready under its own user within 10 s of its start.
	ready := time.Now()
	for name, r := range d.roles {
		r.p.ready(t, time.Until(r.started.Add(10*time.Second)), "http://"+r.http+"/readyz")
		t.Logf("%s ready %s after its start", name, time.Since(r.started).Round(10*time.Millisecond))
	}

	guests := d.guests()
	a, b, c := guests[0], guests[1], guests[2]
	// Desired state over HTTP (converge api) and as publisher (NATS).
	d.post(a, fmt.Sprintf(`{"vmid":%d,"description":"posted over HTTP"}`, a))
	pub := d.connect(natsauth.Publisher, nil)
	pubJS, _ := jetstream.New(pub)
	publish := func(vmid int, body string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pubJS.Publish(ctx, events.Subject(events.KindDesired, "pve", vmid), []byte(body)); err != nil {
			t.Fatalf("publish as publisher: %v", err)
		}
	}
	publish(b, fmt.Sprintf(`{"vmid":%d,"description":"published as publisher"}`, b))
	d.wait(a, b)
	for vmid, want := range map[int]string{a: "posted over HTTP", b: "published as publisher"} {
		if g, _ := sim.Guest(vmid); strings.TrimSpace(g.Config["description"]) != want {
			t.Errorf("guest %d: description %q, want %q", vmid, g.Config["description"], want)
		}
	}

	// No role but the executors' may touch their consumers.
	consumer := "executor-pve-p" + fmt.Sprintf("%02d", events.Partition("pve", c, 16))
	for _, role := range []natsauth.Role{natsauth.Auditor, natsauth.Publisher} {
		denied := make(chan string, 8)
		nc := d.connect(role, denied)
		for _, subj := range []string{"$JS.API.CONSUMER.DELETE.PVE." + consumer, "$JS.API.CONSUMER.CREATE.PVE." + consumer,
			"$JS.API.CONSUMER.CREATE.PVE." + consumer + ".pve.action.pve.*.0", "$JS.API.CONSUMER.DURABLE.CREATE.PVE." + consumer} {
			if err := nc.Publish(subj, []byte(`{"stream_name":"PVE","config":{"durable_name":"`+consumer+`","ack_policy":"none"}}`)); err != nil {
				t.Fatal(err)
			}
			select {
			case e := <-denied:
				if !strings.Contains(e, subj) {
					t.Errorf("%s %s: a violation for another subject: %s", role, subj, e)
				}
			case <-time.After(30 * time.Second): // an outer bound: the violation comes at once
				t.Errorf("%s may publish %s", role, subj)
			}
		}
	}
	admin := d.connect(natsauth.Admin, nil)
	adminJS, _ := jetstream.New(admin)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	info, err := adminJS.Consumer(ctx, "PVE", consumer)
	if err != nil || info.CachedInfo().Config.AckPolicy != jetstream.AckExplicitPolicy {
		t.Fatalf("consumer %s after the refused requests: %v", consumer, err)
	}

	// A durable consumer deleted by admin comes back within 10 s, and the
	// guest of its partition converges.
	if err := adminJS.DeleteConsumer(ctx, "PVE", consumer); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	eventually(t, 10*time.Second, consumer+" created again", func() bool {
		_, err := adminJS.Consumer(ctx, "PVE", consumer)
		return err == nil
	})
	t.Logf("%s deleted by admin, back after %s", consumer, time.Since(deleted).Round(10*time.Millisecond))
	publish(c, fmt.Sprintf(`{"vmid":%d,"description":"after the consumer's deletion"}`, c))
	d.wait(c)

	// No permission violation in any role's log for 60 s of this.
	if left := time.Until(ready.Add(60 * time.Second)); left > 0 {
		time.Sleep(left) // the 60 s the logs must stay free of violations
	}
	for name, r := range d.roles {
		b, err := os.ReadFile(r.p.log)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(bytes.ToLower(b), []byte("permissions violation")); i >= 0 {
			t.Errorf("%s logged a permission violation: %s", name, tail(string(b[:min(len(b), i+300)]), 600))
		}
		if bytes.Contains(b, []byte("NOT READY")) {
			t.Errorf("%s was not ready at some point:\n%s", name, tail(string(b), 2000))
		}
	}
}

// guests lists the simulator's guests that are not templates.
func (d *deployment) guests() []int {
	var out []int
	for _, g := range d.sim.Guests() {
		if !g.Template {
			out = append(out, g.VMID)
		}
	}
	if len(out) < 3 {
		d.t.Fatalf("%d guests", len(out))
	}
	return out
}

// post posts a desired state to `converge api`.
func (d *deployment) post(vmid int, body string) {
	t := d.t
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://%s/v1/desired/%d", d.roles["api"].http, vmid), strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+deployAPIAuth)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		var b bytes.Buffer
		_, _ = b.ReadFrom(res.Body)
		t.Fatalf("POST /v1/desired/%d to converge api: %s %s", vmid, res.Status, b.String())
	}
}

// wait runs `converge wait` as the auditor.
func (d *deployment) wait(vmids ...int) {
	args := []string{"wait", "--timeout", "2m"}
	for _, id := range vmids {
		args = append(args, strconv.Itoa(id))
	}
	if out, code := d.cli(natsauth.Auditor, args...); code != 0 {
		d.t.Fatalf("converge wait %v as auditor: exit %d\n%s", vmids, code, out)
	}
}
