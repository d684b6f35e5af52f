package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envMention is the help's "(env NAME)", which the table's column says.
var envMention = regexp.MustCompile(` \(env [A-Z_]+( or [A-Z_]+)*\)`)

var update = flag.Bool("update", false, "rewrite docs/configuration.md from the flags")

// flagDoc is one setting as docs/configuration.md lists it.
type flagDoc struct{ name, env, usage, def string }

// flagDocs are cmd's settings that the environment and the file set,
// root's persistent ones excluded.
func flagDocs(cmd *cobra.Command) []flagDoc {
	var out []flagDoc
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !fromEnvOrFile(cmd, f) || cmd.Root().PersistentFlags().Lookup(f.Name) == f {
			return
		}
		out = append(out, docOf(f))
	})
	return out
}

func docOf(f *pflag.Flag) flagDoc {
	def := f.DefValue
	if host, _ := os.Hostname(); f.Name == "name" && def == host {
		def = "(host name)"
	}
	if def == "" || def == "[]" {
		def = "–"
	} else {
		def = "`" + def + "`"
	}
	env := envName(f.Name)
	for _, a := range envAliases[f.Name] {
		env += ", " + a
	}
	usage := envMention.ReplaceAllString(f.Usage, "")
	usage = strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(usage)
	return flagDoc{name: f.Name, env: env, usage: usage, def: def}
}

func table(b *strings.Builder, docs []flagDoc) {
	b.WriteString("| Flag / YAML key | Variable | Default | Meaning |\n|---|---|---|---|\n")
	for _, d := range docs {
		fmt.Fprintf(b, "| `--%s` | %s | %s | %s |\n", d.name, d.env, d.def, strings.ReplaceAll(d.usage, "|", "\\|"))
	}
	b.WriteString("\n")
}

// configurationDoc is docs/configuration.md, generated from the flags.
func configurationDoc() string {
	root := newRoot()
	find := func(name string) *cobra.Command {
		c, _, _ := root.Find([]string{name})
		_ = c.ParseFlags(nil) // merges the global flags in
		return c
	}
	var b strings.Builder
	b.WriteString(configDocHead)
	b.WriteString("## Global settings (every command)\n\n")
	var global []flagDoc
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if !skipFlag(f.Name) {
			global = append(global, docOf(f))
		}
	})
	table(&b, global)
	b.WriteString("## Roles: `up`, `observer`, `planner`, `executor`\n\n")
	roles := flagDocs(find("observer"))
	table(&b, roles)
	b.WriteString("## `up` only\n\n`--nats` is not read from the environment or the file by `up`: it runs its embedded NATS unless `--nats` is on its command line.\n\n")
	inRoles := map[string]bool{}
	for _, d := range roles {
		inRoles[d.name] = true
	}
	var up []flagDoc
	for _, d := range flagDocs(find("up")) {
		if !inRoles[d.name] {
			up = append(up, d)
		}
	}
	table(&b, up)
	b.WriteString("## `sim`\n\n")
	table(&b, flagDocs(find("sim")))
	b.WriteString("## `notify`\n\nThe notifier's routes are in its own file, `--notify-config` ([notifications.md](notifications.md)).\n\n")
	table(&b, flagDocs(find("notify")))
	b.WriteString("## Other commands\n\nThe flags of the one-off commands (`desire`, `wait`, `approve`, …) come from their command line only, except `desire --sign-key` (`CONVERGE_SIGN_KEY`). See `converge COMMAND --help`.\n")
	return b.String()
}

const configDocHead = `# Configuration

<!-- Generated from the flags by TestConfigurationDoc (cmd/converge); run
     go test ./cmd/converge -run TestConfigurationDoc -update
     after changing a flag. -->

Every setting is a flag. Each is also read from an environment variable,
` + "`CONVERGE_<FLAG>`" + ` (the flag's name in capitals, dashes as underscores; a few
older names still work after it), and from a YAML file given with
` + "`--config FILE`" + ` (or ` + "`CONVERGE_CONFIG`" + `) whose keys are the long flag names:

` + "```yaml" + `
pve-url: https://pve1:8006
pve-token-id: converge@pve!converge
pve-token-secret-file: /etc/converge/pve-token
observe-interval: 15s
http-host: [converge.example.org]
` + "```" + `

The first source that has a setting wins: **flag > environment > file >
default**. A key the file does not know is refused; a key of another
command (a ` + "`sim`" + ` setting read by ` + "`up`" + `) is ignored. Lists take a YAML list in the file
and commas in a variable. Values are checked before anything starts, and a
bad one is named by its flag and variable, with exit status 2.

` + "`converge config print [COMMAND [FLAGS]]`" + ` shows the settings COMMAND (default
` + "`up`" + `) would run with, each with its source (` + "`flag`, `env NAME`, `file PATH`, `default`" + `);
passwords and token secrets are masked. Prefer the ` + "`*-file`" + ` flags for secrets:
the command line is readable by every local user.

A setting given is a value, never "the default": 0 means what the
table says it means (` + "`--max-guests 0`" + `: no cap), and is refused, naming the
flag, where it would mean nothing (` + "`--node-rate 0`" + `: no call at all). A
setting that can be switched off takes a keyword instead of a number:

| Flag | Keyword | Meaning |
|---|---|---|
| ` + "`--config-refresh`" + ` | ` + "`off`" + ` | no verification reads (only new, changed and unconfirmed guests are read) |
| ` + "`--checkpoint-interval`" + ` | ` + "`off`" + ` | no checkpoints: a restarted planner folds the whole journal |
| ` + "`--node-concurrency`" + `, ` + "`--clone-concurrency`" + `, ` + "`--create-rate`" + ` | ` + "`unlimited`" + ` | no such limit |
| ` + "`--node-rate`" + ` | ` + "`unlimited`" + ` | no pacing of Proxmox calls per node |

In the file, an unquoted ` + "`off`" + ` is YAML's false, which is taken as off too.
Before the keywords, a negative number said the same (` + "`--node-rate -1`" + `); it
is still accepted, in a flag, a variable or the file, with a warning that
names the keyword (logged at start, and by ` + "`config print`" + `). ` + "`--config-refresh`" + `
follows ` + "`--observe-interval`" + ` unless given; ` + "`--config-refresh 0`" + `, which
meant that, still does, with a warning to leave the flag out. In Go, each package's
configuration starts from its ` + "`DefaultConfig()`" + ` (the defaults below, each
with its reason in the package), and its ` + "`Validate`" + ` refuses a field left
zero where zero means nothing, naming the field.

Exit codes: [exit-codes.md](exit-codes.md).

`

// docs/configuration.md lists every setting as the flags define it.
func TestConfigurationDoc(t *testing.T) {
	clearEnv(t)
	want := configurationDoc()
	const path = "../../docs/configuration.md"
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("docs/configuration.md is out of date with the flags: run go test ./cmd/converge -run TestConfigurationDoc -update")
	}
}
