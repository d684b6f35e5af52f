package main

import (
	"fmt"
	"runtime/debug"
	"slices"
	"text/tabwriter"

	json "github.com/go-json-experiment/json/v1"
	"github.com/spf13/cobra"
)

// annotNoConfig marks a command whose flags are not applied before it
// runs (config print applies them to the command it shows).
const annotNoConfig = "converge/noconfig"

func newConfigCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Show the effective configuration"}
	print := &cobra.Command{
		Use:   "print [COMMAND [FLAGS...]]",
		Short: "Print the effective configuration of a command (default up): every setting, its value and where it came from; secrets masked",
		Long: `Prints the settings COMMAND (up, observer, planner, executor, api or sim; default up)
would run with, given FLAGS, the environment and the --config file: each
setting's value and its source (flag, env NAME, file PATH or default).
Secrets (passwords, token secrets) are masked.

  converge config print
  converge config print executor --config /etc/converge.yaml -o json`,
		Annotations:        map[string]string{annotNoConfig: "1"},
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if slices.Contains(args, "-h") || slices.Contains(args, "--help") {
				return cmd.Help()
			}
			target, rest := "up", args
			if len(args) > 0 && configurable[args[0]] {
				target, rest = args[0], args[1:]
			} else if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
				return usageError{fmt.Errorf("config print: %q is not one of up, observer, planner, executor, api, sim", args[0])}
			}
			tc, _, err := cmd.Root().Find([]string{target})
			if err != nil {
				return err
			}
			if err := tc.ParseFlags(rest); err != nil {
				return usageError{err}
			}
			settings, err := applyConfig(tc)
			if err != nil {
				return usageError{err}
			}
			if err := g.validate(tc); err != nil {
				return usageError{err}
			}
			if notes := g.deprecated[tc]; notes != nil {
				for _, n := range *notes {
					fmt.Fprintln(cmd.ErrOrStderr(), "warning:", n)
				}
			}
			out := cmd.OutOrStdout()
			if g.output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"command": target, "settings": settings})
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE\tENV")
			for _, s := range settings {
				v := s.Value
				if v == "" {
					v = `""`
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Key, v, s.Source, dash(s.Env))
			}
			return tw.Flush()
		},
	}
	cmd.AddCommand(print)
	return cmd
}

// version is the module version and VCS commit the binary was built from.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	var rev, modified, at string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		case "vcs.time":
			at = s.Value
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += " (commit " + rev
		if modified == "true" {
			v += ", modified"
		}
		if at != "" {
			v += ", " + at
		}
		v += ")"
	}
	return v + " " + bi.GoVersion
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print converge's version: module version, VCS commit, Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), "converge", version())
			return nil
		},
	}
}
