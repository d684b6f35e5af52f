package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/converge-pve/converge/events"
)

// Exit codes (docs/exit-codes.md, and `converge --help`).
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2 // bad flags, arguments or configuration; nothing was done
	exitNotDone     = 3 // wait: timed out, or the watch ended, before every guest converged
	exitGuestFailed = 4 // wait: a guest is error or rejected
	// exitNeedsOperator: wait stopped at a guest that only an operator
	// can move on (held, paused, a destroy behind its gate, a change that
	// waits for a restart under restart: never).
	exitNeedsOperator = 5
	exitInterrupted   = 130
)

const exitCodesHelp = `Exit codes:
  0    success
  1    error (NATS or Proxmox unreachable, credentials refused, a role failed)
  2    usage: a bad flag, argument or setting (also: wait for a guest without desired state)
  3    wait: timed out (or the watch ended) before every guest converged; rebuild --wait: no planner rewrote the views
  4    wait: a guest is error or rejected
  5    wait: a guest waits for an operator (held, paused, a destroy behind its gate, a restart under restart: never)
  6    plan -f --detailed-exitcode: publishing the file would change something
  130  interrupted twice (the second Ctrl-C does not wait for the drain)`

// usageError is a bad flag, argument or setting: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// codeOf is the exit status of a command's error.
func codeOf(err error) int {
	var ec exitCode
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ec):
		return ec.code
	case errors.As(err, &ue):
		return exitUsage
	case strings.HasPrefix(err.Error(), "unknown command"):
		return exitUsage
	}
	return exitError
}

// finishRoot completes the command tree: usage errors exit 2, every flag's
// help names its variable, and the help lists the exit codes.
func finishRoot(root *cobra.Command) {
	root.Long = root.Short + ".\n\n" + exitCodesHelp + "\n\nConfiguration: flags, then CONVERGE_<FLAG> variables, then the --config file (docs/configuration.md)."
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if args := c.Args; args != nil {
			c.Args = func(cmd *cobra.Command, a []string) error {
				if err := args(cmd, a); err != nil {
					return usageError{err}
				}
				return nil
			}
		}
		name := func(f *pflag.Flag) {
			if !fromEnvOrFile(c, f) || strings.Contains(f.Usage, envName(f.Name)) {
				return
			}
			env := envName(f.Name)
			for _, a := range envAliases[f.Name] {
				if !strings.Contains(f.Usage, a) {
					env += " or " + a
				}
			}
			f.Usage += " (env " + env + ")"
		}
		if c == root {
			c.PersistentFlags().VisitAll(name)
		} else {
			c.Flags().VisitAll(func(f *pflag.Flag) {
				if root.PersistentFlags().Lookup(f.Name) != f {
					name(f)
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// validate checks the global settings, naming the flag and its variable.
func (g *globals) validate(cmd *cobra.Command) error {
	switch g.output {
	case "text", "json", "jsonl":
	case "yaml":
		if cmd.Annotations[annotYAML] == "" {
			return fmt.Errorf("%s must be text, json or jsonl, got \"yaml\" (-o yaml is for `converge import` only)", flagRef("output")+" / -o")
		}
	default:
		return fmt.Errorf("%s must be text, json or jsonl, got %q", flagRef("output")+" / -o", g.output)
	}
	if g.output == "jsonl" && cmd.Annotations[annotJSONL] == "" {
		return fmt.Errorf("-o jsonl (one JSON object per line) is for `converge history` and `converge replay`; %s prints one document: use -o json", cmd.CommandPath())
	}
	if g.replicas < 1 || g.replicas > 5 {
		return fmt.Errorf("%s must be within 1..5, got %d", flagRef("replicas"), g.replicas)
	}
	if _, err := zerolog.ParseLevel(g.logLevel); err != nil || g.logLevel == "" {
		return fmt.Errorf("%s must be debug, info, warn or error, got %q", flagRef("log-level"), g.logLevel)
	}
	switch g.logFormat {
	case "auto", "json", "console":
	default:
		return fmt.Errorf("%s must be json, console or auto, got %q", flagRef("log-format"), g.logFormat)
	}
	if err := events.ValidateCluster(g.cluster); err != nil {
		return fmt.Errorf("%s: %w", flagRef("cluster"), err)
	}
	if check := g.checks[cmd]; check != nil {
		return check()
	}
	return nil
}

// logTimeFormat is RFC 3339 with milliseconds, in JSON and on the console.
const logTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// zerologGlobals sets zerolog's package settings once: a second command
// run in one process (tests) must not write them while the first one's
// connections still log.
var zerologGlobals sync.Once

// logger is the process's logger: JSON unless stderr is a terminal
// (--log-format auto), console with colour on a terminal only.
func (g *globals) logger() (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(g.logLevel)
	if err != nil {
		return zerolog.Nop(), fmt.Errorf("%s: %w", flagRef("log-level"), err)
	}
	zerologGlobals.Do(func() {
		zerolog.TimeFieldFormat = logTimeFormat
		// Durations in seconds, with their fraction ("interval":10,
		// "window": 300, "retry_in":0.25), not bare milliseconds.
		zerolog.DurationFieldUnit = time.Second
		zerolog.DurationFieldInteger = false
	})
	tty := term.IsTerminal(int(os.Stderr.Fd()))
	console := g.logFormat == "console" || (g.logFormat != "json" && tty)
	var l zerolog.Logger
	if console {
		l = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: logTimeFormat, NoColor: !tty})
	} else {
		l = zerolog.New(os.Stderr)
	}
	return l.Level(lvl).With().Timestamp().Logger(), nil
}
