// Command converge is the converge reconciler's single binary: every role,
// the Proxmox VE simulator and the operator CLI (DESIGN.md §3).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "converge:", err)
		os.Exit(1)
	}
}

// globals are the flags every command takes.
type globals struct {
	output   string
	logLevel string
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "converge",
		Short:         "Keep Proxmox VE guests in the state other services ask for",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "text", "output format: text or json")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", envOr("CONVERGE_LOG_LEVEL", "info"), "log level: debug, info, warn, error (env CONVERGE_LOG_LEVEL)")
	root.AddCommand(newSimCmd(g))
	return root
}

func (g *globals) logger() (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(g.logLevel)
	if err != nil {
		return zerolog.Nop(), fmt.Errorf("--log-level: %w", err)
	}
	return zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05.000"}).Level(lvl).With().Timestamp().Logger(), nil
}

func (g *globals) validateOutput() error {
	switch g.output {
	case "text", "json":
		return nil
	}
	return fmt.Errorf("-o must be text or json, got %q", g.output)
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}
