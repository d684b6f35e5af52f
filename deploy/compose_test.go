package deploy_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

type composeFile struct {
	Services map[string]composeService `json:"services"`
	Volumes  map[string]any            `json:"volumes"`
}

type composeService struct {
	Image       string            `json:"image"`
	Build       map[string]any    `json:"build"`
	Command     []string          `json:"command"`
	Environment map[string]string `json:"environment"`
	Volumes     []string          `json:"volumes"`
	Healthcheck struct {
		Test    []string `json:"test"`
		Disable bool     `json:"disable"`
	} `json:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `json:"condition"`
	} `json:"depends_on"`
}

var composeVar = regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*)(?:(:?[-?])([^}]*))?\}`)

// TestCompose checks compose/compose.yaml: the services of the stack, that
// every converge command uses flags converge has, the cluster wiring and
// the variables of .env.example.
func TestCompose(t *testing.T) {
	raw, err := os.ReadFile("compose/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	for _, name := range []string{"nats1", "nats2", "nats3", "sim", "provision", "observer", "planner", "executor-1", "executor-2"} {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("no service %s", name)
		}
	}

	// Every ${VAR} is in .env.example, or has a default.
	env := readEnvFile(t, "compose/.env.example")
	for _, m := range composeVar.FindAllStringSubmatch(string(raw), -1) {
		if _, ok := env[m[1]]; !ok && m[2] != ":-" && m[2] != "-" {
			t.Errorf("compose.yaml uses ${%s}; .env.example does not set it", m[1])
		}
	}
	expand := func(s string) string {
		return composeVar.ReplaceAllStringFunc(s, func(v string) string {
			m := composeVar.FindStringSubmatch(v)
			if val, ok := env[m[1]]; ok && val != "" {
				return val
			}
			return m[3]
		})
	}

	roles := map[string][]string{}
	nats := 0
	for name, s := range c.Services {
		image := expand(s.Image)
		if strings.HasPrefix(image, "nats:2") {
			nats++
			checkNATSService(t, name, s, expand)
			continue
		}
		if s.Build == nil {
			t.Errorf("%s: image %q is neither nats:2.x nor built from the repository", name, image)
			continue
		}
		if s.Build["dockerfile"] != "deploy/compose/Dockerfile" {
			t.Errorf("%s: build %v, want deploy/compose/Dockerfile", name, s.Build)
		}
		if len(s.Command) == 0 {
			t.Errorf("%s: no command", name)
			continue
		}
		cmd := s.Command[0]
		roles[cmd] = append(roles[cmd], name)
		args := make([]string, len(s.Command))
		for i, a := range s.Command {
			args[i] = expand(a)
		}
		checkFlags(t, "compose.yaml "+name, cmd, args[1:])
		h := help(t, cmd)
		for k := range s.Environment {
			if !h.env[k] {
				t.Errorf("%s: environment %s is not a variable `converge %s --help` names", name, k, cmd)
			}
		}
		switch cmd {
		case "observer", "planner", "executor", "api", "provision":
			if got := flagValue(args, "--replicas"); got != "3" {
				t.Errorf("%s: --replicas %q, want 3", name, got)
			}
			if got := flagValue(args, "--nats"); got != "nats://nats1:4222,nats://nats2:4222,nats://nats3:4222" {
				t.Errorf("%s: --nats %q, want the three nodes", name, got)
			}
			user := flagValue(args, "--nats-user")
			want := cmd
			if cmd == "provision" {
				want = "admin"
			}
			if user != want {
				t.Errorf("%s: --nats-user %q, want %q", name, user, want)
			}
			if pw := s.Environment["CONVERGE_NATS_PASSWORD"]; !strings.Contains(pw, "CONVERGE_NATS_"+upper(want)+"_PASSWORD") {
				t.Errorf("%s: CONVERGE_NATS_PASSWORD %q, want the %s password", name, pw, want)
			}
			for _, n := range []string{"nats1", "nats2", "nats3"} {
				if s.DependsOn[n].Condition != "service_healthy" {
					t.Errorf("%s: does not wait for %s to be healthy", name, n)
				}
			}
		}
		if cmd != "provision" && cmd != "sim" && s.DependsOn["provision"].Condition != "service_completed_successfully" {
			t.Errorf("%s: does not wait for provision", name)
		}
		if addr := flagValue(args, "--http"); addr != "" {
			_, port, _ := strings.Cut(addr, ":")
			if !slices.Contains(s.Healthcheck.Test, "http://127.0.0.1:"+port+"/readyz") {
				t.Errorf("%s: --http %s but health check %v is not its /readyz", name, addr, s.Healthcheck.Test)
			}
		}
	}
	if nats != 3 {
		t.Errorf("%d nats services, want 3", nats)
	}
	for role, want := range map[string]int{"sim": 1, "provision": 1, "observer": 1, "planner": 1, "executor": 2, "api": 1} {
		if len(roles[role]) != want {
			t.Errorf("%d %s services (%v), want %d", len(roles[role]), role, roles[role], want)
		}
	}
	// The health checks run the probe the Dockerfile builds.
	df, err := os.ReadFile("compose/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"./cmd/converge", "./deploy/compose/healthcheck", "/healthcheck"} {
		if !strings.Contains(string(df), want) {
			t.Errorf("Dockerfile does not mention %s", want)
		}
	}
}

func checkNATSService(t *testing.T, name string, s composeService, expand func(string) string) {
	t.Helper()
	if got := expand(s.Environment["NATS_SERVER_NAME"]); got != name {
		t.Errorf("%s: NATS_SERVER_NAME %q, want %q (cluster.conf routes to nats1..3)", name, got, name)
	}
	// Every variable the configurations read (unquoted, outside comments):
	// users.conf's passwords and cluster.conf's addresses, store and routes.
	for _, f := range []string{"nats/users.conf", "nats/cluster.conf"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^[^#"\n]*?\$([A-Z][A-Z_0-9]*)`).FindAllStringSubmatch(string(b), -1) {
			if _, ok := s.Environment[m[1]]; !ok {
				t.Errorf("%s: %s reads $%s, which the service does not set", name, f, m[1])
			}
		}
	}
	mounted := strings.Join(s.Volumes, " ")
	for _, f := range []string{"../nats/cluster.conf:/etc/nats/cluster.conf", "../nats/users.conf:/etc/nats/users.conf"} {
		if !strings.Contains(mounted, f) {
			t.Errorf("%s: %s not mounted", name, f)
		}
	}
	if !strings.Contains(mounted, ":/var/lib/nats") {
		t.Errorf("%s: no volume for the JetStream store /var/lib/nats", name)
	}
	if !slices.Contains(s.Command, "/etc/nats/cluster.conf") {
		t.Errorf("%s: command %v does not run cluster.conf", name, s.Command)
	}
}

// flagValue is the value of --name in args (as "--name v" or "--name=v").
func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// readEnvFile reads KEY=value lines (an env file for docker compose or
// systemd's EnvironmentFile=), values unquoted.
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`).MatchString(k) {
			t.Errorf("%s:%d: not KEY=value: %q", path, i+1, line)
			continue
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		env[k] = v
	}
	return env
}
