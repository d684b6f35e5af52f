package main

import (
	"fmt"
	"os/user"
	"strconv"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/control"
)

// operator is who a journalled request from the CLI comes from: the
// local user (only NATS admin may publish control requests at all).
func operator() string {
	who := "converge-cli"
	if u, err := user.Current(); err == nil {
		who += ":" + u.Username
	}
	return who
}

// newOperateCmd builds approve, pause, resume and release: journalled
// operator requests for guests (or all of them), folded by every planner.
func newOperateCmd(g *globals, command, short, long string, allowAll bool) *cobra.Command {
	var all bool
	var reason string
	use := command + " VMID..."
	if allowAll {
		use = command + " VMID...|--all"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		RunE: func(cmd *cobra.Command, args []string) error {
			c := events.Control{Meta: events.NewMeta(operator(), "", time.Now()), Command: command, All: all, Reason: reason}
			for _, a := range args {
				id, err := strconv.Atoi(a)
				if err != nil {
					return usageError{fmt.Errorf("%q is not a vmid", a)}
				}
				c.VMIDs = append(c.VMIDs, id)
			}
			if err := c.Validate(); err != nil {
				return usageError{err}
			}
			b, err := g.connect(cmd.Context(), "converge-"+command)
			if err != nil {
				return err
			}
			defer b.Close()
			seq, err := control.Publish(cmd.Context(), b, g.cluster, c)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"seq": seq, "command": command, "vmids": c.VMIDs, "all": all, "by": c.Publisher,
					"reason": c.Reason})
			}
			what := "all guests"
			if !all {
				what = "guest"
				if len(args) > 1 {
					what += "s"
				}
				what += " " + strings.Join(args, ", ")
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s: journalled as #%d by %s\n", command, what, seq, c.Publisher)
			return nil
		},
	}
	if allowAll {
		cmd.Flags().BoolVar(&all, "all", false, "every guest")
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, in one line (at most 1024 bytes): journalled, shown by history")
	return cmd
}

func newApproveCmd(g *globals) *cobra.Command {
	return newOperateCmd(g, events.CommandApprove,
		"Release disruptive actions the mass-change guard holds (journalled with who approved)",
		"Approve the shutdowns, stops, reboots, migrations and destroys the mass-change guard holds for these guests (those planned from desired state\n"+
			"journalled before the approval), or with --all for every guest, which also lifts the hold an inventory loss put on everything.", true)
}

func newPauseCmd(g *globals) *cobra.Command {
	return newOperateCmd(g, events.CommandPause,
		"Stop acting on guests until `converge resume` (journalled; status paused)",
		"Pause guests, or all with --all: they are still observed and planned, and status shows what would follow, but converge\n"+
			"does nothing to them until resumed. An action already running finishes.", true)
}

func newResumeCmd(g *globals) *cobra.Command {
	return newOperateCmd(g, events.CommandResume,
		"Act on paused guests again (journalled)",
		"Resume guests paused by `converge pause`; --all lifts `pause --all` and every guest's own pause.", true)
}

func newReleaseCmd(g *globals) *cobra.Command {
	return newOperateCmd(g, events.CommandRelease,
		"Hand guests back: forget their desired state; converge leaves them alone until a new one arrives",
		"Release guests: the journal records who released them, their status becomes unmanaged, and converge never touches them\n"+
			"again (drift included) unless a new desired state is published for them.", false)
}
