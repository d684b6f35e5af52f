package pvesim

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Kind is a guest type.
type Kind string

// Guest kinds, as in Proxmox paths and /cluster/resources.
const (
	QEMU Kind = "qemu"
	LXC  Kind = "lxc"
)

// guest is one VM or container. conf holds applied values as PVE writes them
// to the config file; pending and pendingDel are the [PENDING] section.
type guest struct {
	vmid       int
	kind       Kind
	node       string
	status     string // "running" | "stopped"
	paused     bool   // QEMU paused / LXC frozen
	conf       map[string]string
	pending    map[string]string
	pendingDel map[string]bool // true: a force deletion ("!key")
	digest     string
	startedAt  time.Time
	pid        int
	lockGen    int    // invalidates timers of earlier injected locks
	pool       string // resource pool the guest belongs to, "" for none
	disk       int64  // size of the volumes, recomputed on every write
	// resID is the guest's /cluster/resources id ("qemu/100"); bcast what
	// the resources and status answers derive from the config (name, CPUs,
	// memory), recomputed on every write: at 10,000 guests parsing them
	// for every row of an inventory read held s.mu for most of its time.
	resID string
	bcast rrdEntry
	// snaps are the config's [snapname] sections (snapshot.go).
	snaps map[string]*snapshot
	// ci is the [special:cloudinit] section and what the cloud-init
	// drive was last generated from (cloudinit.go).
	ci ciState
}

func (g *guest) lock() string     { return g.conf["lock"] }
func (g *guest) template() bool   { return g.conf["template"] == "1" }
func (g *guest) running() bool    { return g.status == "running" }
func (g *guest) typeWord() string { return map[Kind]string{QEMU: "VM", LXC: "CT"}[g.kind] }

// confPath is the pmxcfs path Proxmox names in "does not exist" errors.
func confPath(kind Kind, node string, vmid int) string {
	dir := "qemu-server"
	if kind == LXC {
		dir = "lxc"
	}
	return fmt.Sprintf("nodes/%s/%s/%d.conf", node, dir, vmid)
}

// touch recomputes the digest: SHA-1 of the serialised config file,
// [PENDING] section included, so any write changes it.
func (g *guest) touch() {
	// One buffer, no string per line: every config write of a guest
	// passes here.
	b := make([]byte, 0, 512)
	if d, ok := g.conf["description"]; ok {
		for line := range strings.SplitSeq(d, "\n") {
			b = append(append(append(b, '#'), url.PathEscape(line)...), '\n')
		}
	}
	for _, k := range sortedKeys(g.conf) {
		if k != "description" {
			b = appendLine(b, k, g.conf[k])
		}
	}
	if len(g.pending) > 0 || len(g.pendingDel) > 0 {
		b = append(b, "\n[PENDING]\n"...)
		for _, k := range sortedKeys(g.pending) {
			b = appendLine(b, k, g.pending[k])
		}
		if len(g.pendingDel) > 0 {
			b = appendLine(b, "delete", g.printPendingDelete())
		}
	}
	b = g.appendSections(b)
	sum := sha1.Sum(b)
	g.digest = hex.EncodeToString(sum[:])
	g.disk = g.diskSize()
	g.bcast = rrdEntry{name: g.displayName(), maxcpu: g.cpus(), maxmem: memoryMiB(g.conf) << 20, known: true}
}

// printPendingDelete is PVE::AbstractConfig's print_pending_delete: the
// [PENDING] section's delete list, a force deletion marked "!key".
func (g *guest) printPendingDelete() string {
	keys := sortedKeys(g.pendingDel)
	for i, k := range keys {
		if g.pendingDel[k] {
			keys[i] = "!" + k
		}
	}
	return strings.Join(keys, ",")
}

// appendLine appends a config file's "key: value" line.
func appendLine(b []byte, k, v string) []byte {
	return append(append(append(append(b, k...), ": "...), v...), '\n')
}

// effective is the config with pending values applied, what GET /config
// returns by default.
func (g *guest) effective() map[string]string {
	out := make(map[string]string, len(g.conf)+len(g.pending))
	for k, v := range g.conf {
		if _, del := g.pendingDel[k]; !del {
			out[k] = v
		}
	}
	for k, v := range g.pending {
		out[k] = v
	}
	return out
}

// applyPending moves the [PENDING] section into the config (start, reboot).
func (g *guest) applyPending() {
	if len(g.pending) == 0 && len(g.pendingDel) == 0 {
		return
	}
	for k, force := range g.pendingDel {
		if v, ok := g.conf[k]; ok && !force {
			g.detachDrive(k, v)
		}
		delete(g.conf, k)
	}
	for k, v := range g.pending {
		if old, ok := g.conf[k]; ok && volid(old) != volid(v) {
			g.detachDrive(k, old)
		}
		g.conf[k] = v
	}
	g.pending = map[string]string{}
	g.pendingDel = map[string]bool{}
	g.touch()
}

// ---- sizes derived from config ---------------------------------------------

func atoiDef(v string, def int64) int64 {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n
	}
	return def
}

// memoryMiB of an applied config (QEMU memory may be "current=N").
func memoryMiB(conf map[string]string) int64 {
	if m := memRe.FindStringSubmatch(conf["memory"]); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n
	}
	return 512
}

// cpus is what status/current and resources report: sockets × cores (or
// vcpus) for QEMU, cores for LXC, not simply the desired cores.
func (g *guest) cpus() float64 {
	if g.kind == LXC {
		cores := float64(atoiDef(g.conf["cores"], 1))
		// A cpulimit below the cores caps what the container gets.
		if f, err := strconv.ParseFloat(g.conf["cpulimit"], 64); err == nil && f > 0 && f < cores {
			return f
		}
		return cores
	}
	if v := atoiDef(g.conf["vcpus"], 0); v > 0 {
		return float64(v)
	}
	return float64(atoiDef(g.conf["sockets"], 1) * atoiDef(g.conf["cores"], 1))
}

func (g *guest) displayName() string {
	if g.kind == LXC {
		if h := g.conf["hostname"]; h != "" {
			return h
		}
		return fmt.Sprintf("CT%d", g.vmid)
	}
	if n := g.conf["name"]; n != "" {
		return n
	}
	return fmt.Sprintf("VM %d", g.vmid)
}

// diskSize sums the sizes of the guest's volumes, in bytes.
func (g *guest) diskSize() int64 {
	var total int64
	for k, v := range g.conf {
		if !(strings.HasPrefix(k, "scsi") || strings.HasPrefix(k, "virtio") || strings.HasPrefix(k, "sata") ||
			k == "rootfs" || strings.HasPrefix(k, "mp")) {
			continue
		}
		for _, part := range strings.Split(v, ",") {
			if sz, ok := strings.CutPrefix(part, "size="); ok {
				total += parseSize(sz)
			}
		}
	}
	return total
}

func parseSize(s string) int64 {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "T"):
		mult, s = 1<<40, strings.TrimSuffix(s, "T")
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	}
	f, _ := strconv.ParseFloat(s, 64)
	return int64(f * float64(mult))
}

// ---- versions ---------------------------------------------------------------

type versionProfile struct {
	version, release, repoid string
	memoryAsNumber           bool
}

func profileFor(v string) (versionProfile, error) {
	switch v {
	case "7", "7.4":
		return versionProfile{version: "7.4-19", release: "7.4", repoid: "f8d2c0a7", memoryAsNumber: true}, nil
	case "8", "8.4":
		return versionProfile{version: "8.4.14", release: "8.4", repoid: "b502d23c"}, nil
	case "", "9", "9.1", "9.2":
		return versionProfile{version: "9.2.6", release: "9.2", repoid: "a21c9e0f"}, nil
	}
	return versionProfile{}, fmt.Errorf("pvesim: unknown Proxmox version %q (want 7, 8 or 9)", v)
}
