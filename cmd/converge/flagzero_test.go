package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Issue 35, defect 7: --executor-concurrency 0, --node-rate 0, --ack-wait
// 0 and --lease-ttl 0 were accepted and silently became their defaults
// (the packages read a zero setting as "unset"). Every number or duration
// of every command that runs a role, given 0 and a negative value, is now
// either meaningful, and its help says what it means, or refused with
// exit 2 naming the flag (a float given NaN is refused). The flags are
// the commands' own, so a flag added later is covered without touching
// this test.
func TestEveryNumericRoleFlagAtZeroAndBelow(t *testing.T) {
	clearEnv(t)
	root := newRoot()
	cmds := roleCommands(root)
	for _, want := range []string{"up", "observer", "planner", "executor"} {
		if !slices.ContainsFunc(cmds, func(c *cobra.Command) bool { return c.Name() == want }) {
			t.Fatalf("%s is not found to run a role", want)
		}
	}
	for _, cmd := range cmds {
		_ = cmd.ParseFlags(nil) // merges the global flags in
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			kind := f.Value.Type()
			if !numericFlag(kind) {
				return
			}
			values := []string{"0", "-1"}
			if strings.HasPrefix(kind, "float") {
				values = append(values, "NaN") // parsed as a number, and never one
			}
			for _, v := range values {
				if kind == "duration" {
					v += "s"
				}
				t.Run(cmd.Name()+"/"+f.Name+"="+v, func(t *testing.T) {
					out, err := run(t, "config", "print", cmd.Name(), "--"+f.Name+"="+v)
					if err != nil {
						if code := codeOf(err); code != exitUsage || !namesFlag(err.Error(), f.Name) {
							t.Fatalf("exit %d: %v; want %d naming --%s\n%s", code, err, exitUsage, f.Name, out)
						}
						return
					}
					if v == "NaN" {
						t.Fatal("NaN accepted")
					}
					if why, documented := documents(f, v); !documented {
						t.Fatalf("accepted, but the help does not say what %s means (%s): %q", v, why, f.Usage)
					}
				})
			}
		})
	}
}

// roleCommands are the commands that run a role: those that take every
// role flag (addRoleFlags).
func roleCommands(root *cobra.Command) []*cobra.Command {
	ref := &cobra.Command{Use: "ref"}
	addRoleFlags(ref, &roleFlags{}, "")
	var out []*cobra.Command
	for _, c := range root.Commands() {
		all := true
		ref.Flags().VisitAll(func(f *pflag.Flag) { all = all && c.Flags().Lookup(f.Name) != nil })
		if all {
			out = append(out, c)
		}
	}
	return out
}

// numericFlag reports whether a flag of this pflag type takes a number or
// a duration.
func numericFlag(kind string) bool {
	return kind == "duration" || strings.HasPrefix(kind, "int") || strings.HasPrefix(kind, "uint") ||
		strings.HasPrefix(kind, "float")
}

// namesFlag reports whether msg names --flag itself (not a longer flag
// it is the start of).
func namesFlag(msg, flag string) bool {
	return regexp.MustCompile(`--` + regexp.QuoteMeta(flag) + `([^a-z0-9-]|$)`).MatchString(msg)
}

// plainCounts are flags whose 0 is plainly that many things: up's
// simulator with no demo guests. (Its help, in up.go, could say "0: none".)
var plainCounts = []string{"sim-guests"}

// documents reports whether f's help says what the accepted value v
// means: "0: …" for zero, "negative: …" (or "0 or negative") below it.
func documents(f *pflag.Flag, v string) (string, bool) {
	if strings.HasPrefix(v, "-") {
		return `"negative"`, strings.Contains(f.Usage, "negative")
	}
	return `"0:"`, strings.Contains(f.Usage, "0:") || slices.Contains(plainCounts, f.Name)
}
