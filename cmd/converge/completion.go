package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/internal/views"
)

// completionTimeout bounds the views read of a vmid completion: a shell
// must not hang on an unreachable NATS.
const completionTimeout = 2 * time.Second

// enumFlags are the flags with a fixed set of values, completed by the shell.
var enumFlags = map[string][]string{
	"power":           {"running", "stopped"},
	"restart":         {"never", "allowed"},
	"kind":            {"qemu", "lxc"},
	"snapshot-before": {"restart", "migrate", "resize"},
	"log-format":      {"auto", "json", "console"},
	"log-level":       {"debug", "info", "warn", "error"},
	"output":          {"text", "json", "jsonl"},
}

// vmidCommands take guests' vmids as arguments.
var vmidCommands = map[string]bool{"desire": true, "status": true, "wait": true, "history": true,
	"approve": true, "pause": true, "resume": true, "release": true}

// addCompletions completes vmids (from the views) and the enum flags'
// values in every command (`converge completion bash|zsh|fish`).
func addCompletions(root *cobra.Command, g *globals) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if vmidCommands[c.Name()] && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = completeVMIDs(g)
		}
		fs := c.LocalFlags()
		if c == root {
			fs = c.PersistentFlags()
		}
		for name, values := range enumFlags {
			if fs.Lookup(name) != nil {
				_ = c.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// completeVMIDs lists the guests of the views, each with its state and
// name; nothing if NATS does not answer in time.
func completeVMIDs(g *globals) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		// The configuration (env, file) applies to the completion too.
		if _, err := applyConfig(cmd); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		b, r, err := openViews(ctx, g, "converge-complete")
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer b.Close()
		docs, err := r.List(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		given := map[string]bool{}
		for _, a := range args {
			given[a] = true
		}
		var out []cobra.Completion
		for i := range docs {
			id := strconv.Itoa(docs[i].View.VMID)
			if given[id] {
				continue
			}
			_, name, _ := identity(views.Summarise(&docs[i]))
			out = append(out, cobra.CompletionWithDesc(id, fmt.Sprintf("%s %s", docs[i].Status.Kind, name)))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
