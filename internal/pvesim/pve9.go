package pvesim

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Guest behaviours that differ between the PVE releases the simulator
// presents, each from the Proxmox source named beside it. PVE 9 is
// pve-container 6.x and qemu-server 9.x; PVE 8 is pve-container 5.x and
// qemu-server 8.x.

// pve9 reports whether the simulator presents PVE 9 (or later).
func (s *Sim) pve9() bool {
	major, _, _ := strings.Cut(s.version.release, ".")
	n, _ := strconv.Atoi(major)
	return n >= 9
}

// ---- containers: unprivileged ----------------------------------------------

// lxcUnprivileged sets a new container's unprivileged flag as
// pve-container's API2/LXC.pm create_vm does: "unprivileged" is extracted
// from the parameters and written back only as
// `$conf->{unprivileged} = 1 if $unprivileged;`, so an explicit 0 leaves
// the key out (every release). From pve-container 6.0.6 (PVE 9, commit
// 103068a "api: create: default to unprivileged containers") a create that
// is not a restore does `$unprivileged = 1 if !defined($unprivileged);`:
// a container created without the parameter is unprivileged. On PVE 8 it
// stays privileged (the key absent; the config schema's default is still
// 0, "as that would break existing configs"). A restore keeps what the
// archive says. q.params holds the request; conf is the new config,
// "unprivileged" already canonical ("0"/"1") when given.
func (s *Sim) lxcUnprivileged(q *req, conf map[string]string) {
	restore, _ := q.boolParam("restore")
	if !q.has("unprivileged") && s.pve9() && !restore {
		conf["unprivileged"] = "1"
	}
	if conf["unprivileged"] != "1" {
		delete(conf, "unprivileged")
	}
}

// ---- QEMU: the state of a hibernated VM -------------------------------------

// vmStateKeys are the keys qemu-server writes beside vmstate when it saves
// a running VM's state and removes again when the VM starts
// (QemuServer.pm vm_start_nolock: `delete $conf->@{qw(lock vmstate
// running-nets-host-mtu runningmachine runningcpu)}` on resume,
// remove_left_over_vmstate_opts otherwise).
var vmStateKeys = []string{"vmstate", "runningmachine", "runningcpu", "running-nets-host-mtu"}

// hibernated writes into a VM's current config what vm_suspend with
// todisk writes (QemuServer/RunState.pm vm_suspend →
// QemuConfig.pm __snapshot_save_vmstate with $suspend set, so into the
// current config, not a snapshot): the state volume
// "vm-<vmid>-state-suspend-<YYYY-MM-DD>" on find_vmstate_storage's
// storage, runningmachine and runningcpu, and from qemu-server 9.0.20
// (commit 7ceb6b72 "snapshot: introduce running-nets-host-mtu property")
// running-nets-host-mtu. A running VM's config carries none of them: they
// exist only while the state is saved (hibernated VM, RAM snapshots).
// Caller holds s.mu.
func (s *Sim) hibernated(g *guest) {
	st := g.vmstateStorage()
	g.conf["vmstate"] = fmt.Sprintf("%s:vm-%d-state-suspend-%s", st, g.vmid, time.Now().Format("2006-01-02"))
	g.conf["runningmachine"] = s.runningMachine(g.conf)
	g.conf["runningcpu"] = "kvm64,enforce,+kvm_pv_eoi,+kvm_pv_unhalt,+lahf_lm,+sep"
	if s.pve9() {
		if v := s.netsHostMTU(g.conf); v != "" {
			g.conf["running-nets-host-mtu"] = v
		}
	}
}

// dropVMState removes the saved-state keys when a VM starts (see
// vmStateKeys); it reports whether the config changed.
func dropVMState(g *guest) bool {
	changed := false
	for _, k := range vmStateKeys {
		if _, ok := g.conf[k]; ok {
			delete(g.conf, k)
			changed = true
		}
	}
	return changed
}

// discardsHibernation reports whether a config write deletes the saved
// state of a hibernated VM: qemu-server's update_vm_api, for "vmstate" in
// delete, takes a 'suspended' lock out of check_lock's way (the "FIXME:
// 'suspended' lock should probably be a state or \"weak\" lock?!").
func discardsHibernation(g *guest, ch *configChange) bool {
	return g.kind == QEMU && g.lock() == "suspended" && slices.Contains(ch.del, "vmstate")
}

// vmStateDeletes is the delete list update_vm_api works through when it
// names vmstate: the 'suspended' lock, runningmachine, runningcpu and
// running-nets-host-mtu go with it, each if set (API2/Qemu.pm
// $load_and_check_config with $update_delete).
func vmStateDeletes(g *guest, del []string) []string {
	if g.kind != QEMU || !slices.Contains(del, "vmstate") {
		return del
	}
	if g.lock() == "suspended" {
		del = append(del, "lock")
	}
	for _, k := range vmStateKeys[1:] {
		if _, ok := g.conf[k]; ok {
			del = append(del, k)
		}
	}
	return del
}

// machineVersionRe is a versioned machine type, "pc-i440fx-9.2+pve1",
// "pc-q35-10.0".
var machineVersionRe = regexp.MustCompile(`-(\d+)\.(\d+)(?:\+pve(\d+))?$`)

// runningMachine is the machine a VM runs: the version its "machine"
// pins, else the newest of the QEMU the release ships (PVE 9.1/9.2:
// pve-qemu-kvm 10.1; before 9 the simulator's RAM snapshots' 9.0), i440fx
// unless q35 is asked for.
func (s *Sim) runningMachine(conf map[string]string) string {
	m, _, _ := strings.Cut(conf["machine"], ",")
	m = strings.TrimPrefix(m, "type=")
	if machineVersionRe.MatchString(m) {
		if !strings.Contains(m, "+pve") {
			m += "+pve0"
		}
		return m
	}
	typ := "i440fx"
	if strings.Contains(m, "q35") {
		typ = "q35"
	}
	if s.pve9() {
		return "pc-" + typ + "-10.1+pve0"
	}
	return "pc-" + typ + "-9.0+pve0"
}

// netsHostMTU is qemu-server 9's QemuServer/Network.pm get_nets_host_mtu:
// for every virtio NIC, in `sort keys` order, "netN=<host_mtu>" as QOM
// reports it, joined with ','. The device's host_mtu is set by
// print_netdevice_full: on a bridge, the NIC's mtu (1 or unset: the
// bridge's, 1500 on vmbr0 here), always for machine ≥ 10.0+pve1, only when
// not 1500 before; unset reads as 0. "" when the VM has no virtio NIC.
func (s *Sim) netsHostMTU(conf map[string]string) string {
	always := true
	if m := machineVersionRe.FindStringSubmatch(s.runningMachine(conf)); m != nil {
		major, _ := strconv.Atoi(m[1])
		minor, _ := strconv.Atoi(m[2])
		pve, _ := strconv.Atoi(m[3])
		always = major > 10 || major == 10 && (minor > 0 || pve >= 1)
	}
	var keys []string
	for k := range conf {
		if isNetKeyQEMU(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		nic, ok := propList(conf[k], "model")
		if !ok {
			continue
		}
		model := nic["model"]
		for key := range nic {
			if qemuNICModels[key] {
				model = key
			}
		}
		if model != "virtio" {
			continue
		}
		mtu := 0
		if nic["bridge"] != "" {
			mtu = 1500
			if n, err := strconv.Atoi(nic["mtu"]); err == nil && n > 1 {
				mtu = n
			}
			if !always && mtu == 1500 {
				mtu = 0
			}
		}
		out = append(out, fmt.Sprintf("%s=%d", k, mtu))
	}
	return strings.Join(out, ",")
}

// isNetKeyQEMU reports whether k is a QEMU NIC key, net0-net31.
func isNetKeyQEMU(k string) bool {
	n, ok := strings.CutPrefix(k, "net")
	if !ok {
		return false
	}
	i, err := strconv.Atoi(n)
	return err == nil && i >= 0 && i < 32 && strconv.Itoa(i) == n
}
