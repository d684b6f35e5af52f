package main

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/planfile"
)

type desireFlags struct {
	file, power, name, description, tags, kind, publisher, correlation string
	signKey, keyID                                                     string
	cloneNode, cloneStorage, clonePool, restart                        string
	node, pool                                                         string
	set                                                                string
	prune, move                                                        bool
	disks, snapshotBefore                                              []string
	cores, memory, cloneFrom                                           int
	onboot, absent, cloneFull                                          bool
}

func newDesireCmd(g *globals) *cobra.Command { return desireCmd(g, &desireFlags{}) }

// desireCmd is the desire command reading its flags into f.
func desireCmd(g *globals, f *desireFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "desire VMID [flags] | desire -f FILE",
		Short: "Publish a guest's desired state (prints the stream sequence)",
		Long: `Publishes the whole desired state of a guest: only the flags you give are
managed, everything else is left as Proxmox has it. With -f, reads one
desired state, a list of them, or {"guests": [...]} from a YAML or JSON file
('-' for stdin). Every entry is validated before anything is published.

With --set NAME the guests are published as members of set NAME. A guest
belongs to one set at a time: one another set holds is refused (naming
that set) unless --move. With --prune, the set's members missing from the
file are released (as converge release: never destroyed; absent: true in
the file destroys, behind the gate). Releases are control requests: a NATS
user that may not publish them (publisher) is refused before anything is
published.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if f.file != "" && len(args) > 0 {
				return errors.New("give a VMID or -f FILE, not both")
			}
			if f.file == "" && len(args) != 1 {
				return errors.New("want exactly one VMID (or -f FILE)")
			}
			if (f.prune || f.move) && f.set == "" {
				return errors.New("--prune and --move need --set NAME")
			}
			if f.prune && f.file == "" {
				return errors.New("--prune needs -f FILE: it releases the set's members missing from the file")
			}
			if f.set != "" {
				return events.ValidSet(f.set)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var bodies []desiredBody
			var err error
			if f.file != "" {
				bodies, err = readDesiredFile(f.file)
			} else {
				var b desiredBody
				b, err = desiredFromFlags(cmd, f, args[0])
				bodies = []desiredBody{b}
			}
			if err != nil {
				return usageError{err} // the caller's input: nothing was published
			}
			var key ed25519.PrivateKey
			if f.signKey != "" {
				if key, f.keyID, err = loadSigningKey(f.signKey, f.keyID); err != nil {
					return usageError{err}
				}
			}
			b, err := g.connect(cmd.Context(), "converge-desire")
			if err != nil {
				return err
			}
			defer b.Close()
			pub := f.publisher
			if pub == "" {
				pub = "converge-cli"
				if u, err := user.Current(); err == nil {
					pub += ":" + u.Username
				}
			}
			if f.set != "" {
				return desireSet(cmd, g, b, f, bodies, key, pub)
			}
			type out struct {
				VMID int    `json:"vmid"`
				Seq  uint64 `json:"seq"`
			}
			var res []out
			for _, d := range bodies {
				m, err := events.DesiredBodyMessage(d.vmid, d.body,
					events.PublishOptions{Cluster: g.cluster, Publisher: pub, CorrelationID: f.correlation})
				if err != nil {
					return err
				}
				if key != nil {
					if err := events.SignMessage(&m, key, f.keyID, time.Now()); err != nil {
						return err
					}
				}
				ack, err := b.Append(cmd.Context(), m, journal.Expect{})
				if err != nil {
					return fmt.Errorf("publish desired %d: %w", d.vmid, err)
				}
				seq := ack.Seq
				res = append(res, out{d.vmid, seq})
				if g.output == "text" {
					// The journal took it; whether the planners accept it
					// (valid for their signing settings) only they know.
					signed := "unsigned (planners run with --require-signed reject it)"
					if key != nil {
						signed = "signed by " + f.keyID
					}
					fmt.Fprintf(cmd.OutOrStdout(), "desired state of %d journalled: revision %d, %s; `converge status %d` shows whether the planner accepted it\n",
						d.vmid, seq, signed, d.vmid)
				}
			}
			if g.output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.file, "file", "f", "", "YAML or JSON file of desired states ('-' for stdin)")
	fl.StringVar(&f.power, "power", "", "running or stopped")
	fl.IntVar(&f.cores, "cores", 0, "CPU cores")
	fl.IntVar(&f.memory, "memory", 0, "memory in MiB")
	fl.StringVar(&f.name, "name", "", "VM name / CT hostname")
	fl.StringVar(&f.description, "description", "", "notes ('' clears them)")
	fl.StringVar(&f.tags, "tags", "", "comma-separated tags ('' clears them)")
	fl.BoolVar(&f.onboot, "onboot", false, "start on node boot")
	fl.BoolVar(&f.absent, "absent", false, "the guest should not exist")
	fl.StringVar(&f.kind, "kind", "", "qemu or lxc")
	fl.IntVar(&f.cloneFrom, "clone-from", 0, "create the guest, if it does not exist, as a clone of this template")
	fl.StringVar(&f.cloneNode, "clone-node", "", "with --clone-from: the node to create it on (default: the template's)")
	fl.BoolVar(&f.cloneFull, "clone-full", false, "with --clone-from: a full clone (default: linked)")
	fl.StringVar(&f.cloneStorage, "clone-storage", "", "with --clone-full: the target storage")
	fl.StringVar(&f.clonePool, "clone-pool", "", "with --clone-from: the pool the new guest joins")
	fl.StringVar(&f.restart, "restart", "", "never or allowed: may converge restart the guest to apply pending changes (default: the deployment's --restart)")
	fl.StringVar(&f.node, "node", "", "the node the guest should run on (migrated there)")
	fl.StringVar(&f.pool, "pool", "", "the resource pool the guest belongs to ('' for none)")
	fl.StringSliceVar(&f.disks, "disk", nil, "KEY=SIZE_GIB[@STORAGE]: grow disk KEY to SIZE_GIB, or add it on STORAGE (repeatable; scsi0=32, scsi1=8@local-lvm)")
	fl.StringSliceVar(&f.snapshotBefore, "snapshot-before", nil, "take a Proxmox snapshot before these actions: restart, migrate, resize (comma-separated)")
	fl.StringVar(&f.set, "set", "", "publish the guests as members of this set (a guest belongs to one set at a time)")
	fl.BoolVar(&f.prune, "prune", false, "with --set and -f: release the set's members missing from the file (never destroyed; needs a NATS user allowed to publish control requests: api or admin)")
	fl.BoolVar(&f.move, "move", false, "with --set: move guests that another set holds into this one")
	fl.StringVar(&f.publisher, "publisher", "", "who publishes (default converge-cli:$USER)")
	fl.StringVar(&f.correlation, "correlation-id", "", "correlation id linking this change to what it causes")
	fl.StringVar(&f.signKey, "sign-key", "", "sign with this ed25519 private key (PEM, from converge keygen; env CONVERGE_SIGN_KEY)")
	fl.StringVar(&f.keyID, "key-id", "", "the signing key's id (default: the key file's name without extension)")
	return cmd
}

type desiredBody struct {
	vmid int
	body []byte
}

// desiredFromFlags builds the body from the flags given, nothing else.
func desiredFromFlags(cmd *cobra.Command, f *desireFlags, arg string) (desiredBody, error) {
	vmid, err := strconv.Atoi(arg)
	if err != nil {
		return desiredBody{}, fmt.Errorf("VMID %q is not a number", arg)
	}
	d := events.Desired{VMID: vmid}
	ch := cmd.Flags().Changed
	if ch("power") {
		p := events.Power(f.power)
		d.Power = &p
	}
	if ch("cores") {
		d.Cores = &f.cores
	}
	if ch("memory") {
		d.MemoryMiB = &f.memory
	}
	if ch("name") {
		d.Name = &f.name
	}
	if ch("description") {
		d.Description = &f.description
	}
	if ch("tags") {
		tags := []string{}
		for _, t := range strings.Split(f.tags, ",") {
			if t = strings.TrimSpace(t); t != "" {
				tags = append(tags, t)
			}
		}
		d.Tags = &tags
	}
	if ch("onboot") {
		d.OnBoot = &f.onboot
	}
	if ch("kind") {
		k := events.GuestKind(f.kind)
		d.Kind = &k
	}
	d.Absent = f.absent
	if ch("restart") {
		r := events.Restart(f.restart)
		d.Restart = &r
	}
	if ch("clone-from") {
		d.Clone = &events.Clone{From: f.cloneFrom, Node: f.cloneNode, Storage: f.cloneStorage, Pool: f.clonePool}
		if ch("clone-full") {
			d.Clone.Full = &f.cloneFull
		}
	} else if ch("clone-node") || ch("clone-full") || ch("clone-storage") || ch("clone-pool") {
		return desiredBody{}, fmt.Errorf("--clone-node, --clone-full, --clone-storage and --clone-pool need --clone-from")
	}
	if ch("node") {
		d.Node = &f.node
	}
	if ch("pool") {
		d.Pool = &f.pool
	}
	if ch("disk") {
		if d.Disks, err = parseDiskFlags(f.disks); err != nil {
			return desiredBody{}, err
		}
	}
	if ch("snapshot-before") {
		d.SnapshotBefore = f.snapshotBefore
	}
	body, err := json.Marshal(d)
	if err != nil {
		return desiredBody{}, err
	}
	if _, err := events.DecodeDesired(body, vmid); err != nil {
		return desiredBody{}, err
	}
	return desiredBody{vmid, body}, nil
}

// parseDiskFlags reads --disk KEY=SIZE_GIB[@STORAGE] values.
func parseDiskFlags(vals []string) (map[string]events.DiskWant, error) {
	out := map[string]events.DiskWant{}
	for _, v := range vals {
		key, rest, ok := strings.Cut(v, "=")
		size, storage, _ := strings.Cut(rest, "@")
		n, err := strconv.Atoi(size)
		if !ok || err != nil {
			return nil, fmt.Errorf("--disk %q: want KEY=SIZE_GIB or KEY=SIZE_GIB@STORAGE (scsi0=32, scsi1=8@local-lvm)", v)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("--disk %s given twice", key)
		}
		out[key] = events.DiskWant{SizeGiB: n, Storage: storage}
	}
	return out, nil
}

// readDesiredFile reads and validates every entry of a YAML/JSON file.
func readDesiredFile(path string) ([]desiredBody, error) {
	raw, err := readFileArg(path)
	if err != nil {
		return nil, err
	}
	return parseDesiredFile(path, raw)
}

// readFileArg reads a -f FILE argument ('-': standard input).
func readFileArg(path string) ([]byte, error) {
	if path == "-" {
		return readAll(os.Stdin)
	}
	return os.ReadFile(path)
}

// parseDesiredFile validates every entry of a YAML/JSON document; path
// names it in errors.
func parseDesiredFile(path string, raw []byte) ([]desiredBody, error) {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: not YAML or JSON: %w", path, err)
	}
	entries, err := planfile.Split(js)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []desiredBody
	var problems []string
	for i, e := range entries {
		if _, err := events.DecodeDesired(e.Body, e.VMID); err != nil {
			problems = append(problems, fmt.Sprintf("entry %d (vmid %d): %v", i+1, e.VMID, err))
			continue
		}
		out = append(out, desiredBody{e.VMID, e.Body})
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s: nothing published:\n  %s", path, strings.Join(problems, "\n  "))
	}
	return out, nil
}

func readAll(f *os.File) ([]byte, error) {
	var buf bytes.Buffer
	_, err := buf.ReadFrom(f)
	return buf.Bytes(), err
}
