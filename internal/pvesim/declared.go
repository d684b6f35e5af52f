package pvesim

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// ---- declared parameters -----------------------------------------------------
//
// HAND-KEPT LIST, until the rules generated from Proxmox's API schema
// (issue 37) replace it: the parameters Proxmox's API schema (pve-docs
// 9.1.3 api-viewer/apidata.js, each operation's parameters.properties,
// all with additionalProperties 0) declares for each operation the
// simulator serves, path parameters included. PVE::JSONSchema::check_object
// refuses any other parameter before the handler runs:
//
//	400 {"errors":{"<param>":"property is not defined in schema and the schema does not allow additional properties"}}
//
// "@config" stands for the guest config keys the operation's schema
// declares (declaredConfig).
var declaredParams = map[string]string{
	"POST /access/ticket":                                         "new-format otp password path privs realm tfa-challenge username",
	"GET /version":                                                "",
	"GET /cluster/status":                                         "",
	"GET /cluster/resources":                                      "type",
	"GET /cluster/nextid":                                         "vmid",
	"GET /cluster/tasks":                                          "",
	"GET /nodes":                                                  "",
	"GET /nodes/{node}/status":                                    "node",
	"GET /nodes/{node}/tasks":                                     "errors limit node since source start statusfilter typefilter until userfilter vmid",
	"GET /nodes/{node}/tasks/{upid}/status":                       "node upid",
	"GET /nodes/{node}/tasks/{upid}/log":                          "download limit node start upid",
	"DELETE /nodes/{node}/tasks/{upid}":                           "node upid",
	"GET /nodes/{node}/storage":                                   "content enabled format node storage target",
	"GET /nodes/{node}/storage/{storage}/status":                  "node storage",
	"GET /nodes/{node}/aplinfo":                                   "node",
	"POST /nodes/{node}/aplinfo":                                  "node storage template",
	"GET /nodes/{node}/storage/{storage}/content/{volume}":        "node storage volume",
	"GET /nodes/{node}/storage/{storage}/content":                 "content node storage vmid",
	"GET /nodes/{node}/lxc/{vmid}/interfaces":                     "node vmid",
	"GET /cluster/ha/resources":                                   "type",
	"POST /cluster/ha/resources":                                  "comment failback group max_relocate max_restart sid state type",
	"GET /cluster/ha/resources/{sid}":                             "sid",
	"PUT /cluster/ha/resources/{sid}":                             "comment delete digest failback group max_relocate max_restart sid state",
	"DELETE /cluster/ha/resources/{sid}":                          "purge sid",
	"POST /cluster/ha/resources/{sid}/migrate":                    "node sid",
	"GET /storage":                                                "type",
	"GET /storage/{storage}":                                      "storage",
	"GET /nodes/{node}/version":                                   "node",
	"GET /nodes/{node}/network":                                   "node type",
	"GET /nodes/{node}/qemu/{vmid}/agent/network-get-interfaces":  "node vmid",
	"GET /nodes/{node}/qemu/{vmid}/migrate":                       "node target vmid",
	"GET /nodes/{node}/qemu/{vmid}/cloudinit":                     "node vmid",
	"PUT /nodes/{node}/qemu/{vmid}/cloudinit":                     "node vmid",
	"GET /nodes/{node}/qemu/{vmid}/cloudinit/dump":                "node type vmid",
	"GET /pools":                                                  "poolid type",
	"POST /pools":                                                 "comment poolid",
	"GET /pools/{poolid}":                                         "poolid type",
	"PUT /pools/{poolid}":                                         "allow-move comment delete poolid storage vms",
	"DELETE /pools/{poolid}":                                      "poolid",
	"PUT /pools":                                                  "allow-move comment delete poolid storage vms",
	"DELETE /pools":                                               "poolid",
	"GET /nodes/{node}/qemu":                                      "full node",
	"POST /nodes/{node}/qemu":                                     "archive bwlimit force ha-managed import-working-storage live-restore node pool start storage unique vmid @config",
	"GET /nodes/{node}/qemu/{vmid}/status/current":                "node vmid",
	"GET /nodes/{node}/qemu/{vmid}/config":                        "current node snapshot vmid",
	"PUT /nodes/{node}/qemu/{vmid}/config":                        "delete digest force node revert skiplock vmid @config",
	"GET /nodes/{node}/qemu/{vmid}/pending":                       "node vmid",
	"POST /nodes/{node}/qemu/{vmid}/clone":                        "bwlimit description format full name newid node pool snapname storage target vmid",
	"POST /nodes/{node}/qemu/{vmid}/template":                     "disk node vmid",
	"DELETE /nodes/{node}/qemu/{vmid}":                            "destroy-unreferenced-disks node purge skiplock vmid",
	"PUT /nodes/{node}/qemu/{vmid}/resize":                        "digest disk node size skiplock vmid",
	"POST /nodes/{node}/qemu/{vmid}/migrate":                      "bwlimit force migration_network migration_type node online target targetstorage vmid with-conntrack-state with-local-disks",
	"GET /nodes/{node}/qemu/{vmid}/snapshot":                      "node vmid",
	"POST /nodes/{node}/qemu/{vmid}/snapshot":                     "description node snapname vmid vmstate",
	"GET /nodes/{node}/qemu/{vmid}/snapshot/{snapname}":           "node snapname vmid",
	"DELETE /nodes/{node}/qemu/{vmid}/snapshot/{snapname}":        "force node snapname vmid",
	"POST /nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback": "node snapname start vmid",
	"GET /nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config":    "node snapname vmid",
	"PUT /nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config":    "description node snapname vmid",
	"GET /nodes/{node}/lxc":                                       "node",
	"POST /nodes/{node}/lxc":                                      "bwlimit force ha-managed ignore-unpack-errors node ostemplate password pool restore ssh-public-keys start storage unique vmid @config",
	"GET /nodes/{node}/lxc/{vmid}/status/current":                 "node vmid",
	"GET /nodes/{node}/lxc/{vmid}/config":                         "current node snapshot vmid",
	"PUT /nodes/{node}/lxc/{vmid}/config":                         "delete digest node revert vmid @config",
	"GET /nodes/{node}/lxc/{vmid}/pending":                        "node vmid",
	"POST /nodes/{node}/lxc/{vmid}/clone":                         "bwlimit description full hostname newid node pool snapname storage target vmid",
	"POST /nodes/{node}/lxc/{vmid}/template":                      "node vmid",
	"DELETE /nodes/{node}/lxc/{vmid}":                             "destroy-unreferenced-disks force node purge vmid",
	"PUT /nodes/{node}/lxc/{vmid}/resize":                         "digest disk node size vmid",
	"POST /nodes/{node}/lxc/{vmid}/migrate":                       "bwlimit node online restart target target-storage timeout vmid",
	"GET /nodes/{node}/lxc/{vmid}/snapshot":                       "node vmid",
	"POST /nodes/{node}/lxc/{vmid}/snapshot":                      "description node snapname vmid",
	"GET /nodes/{node}/lxc/{vmid}/snapshot/{snapname}":            "node snapname vmid",
	"DELETE /nodes/{node}/lxc/{vmid}/snapshot/{snapname}":         "force node snapname vmid",
	"POST /nodes/{node}/lxc/{vmid}/snapshot/{snapname}/rollback":  "node snapname start vmid",
	"GET /nodes/{node}/lxc/{vmid}/snapshot/{snapname}/config":     "node snapname vmid",
	"PUT /nodes/{node}/lxc/{vmid}/snapshot/{snapname}/config":     "description node snapname vmid",
	"POST /nodes/{node}/qemu/{vmid}/config":                       "background_delay delete digest force import-working-storage node revert skiplock vmid @config",
	"POST /nodes/{node}/qemu/{vmid}/status/start":                 "force-cpu machine migratedfrom migration_network migration_type nets-host-mtu node skiplock stateuri targetstorage timeout vmid with-conntrack-state",
	"POST /nodes/{node}/qemu/{vmid}/status/stop":                  "keepActive migratedfrom node overrule-shutdown skiplock timeout vmid",
	"POST /nodes/{node}/qemu/{vmid}/status/shutdown":              "forceStop keepActive node skiplock timeout vmid",
	"POST /nodes/{node}/qemu/{vmid}/status/reboot":                "node timeout vmid",
	"POST /nodes/{node}/qemu/{vmid}/status/reset":                 "node skiplock vmid",
	"POST /nodes/{node}/qemu/{vmid}/status/suspend":               "node skiplock statestorage todisk vmid",
	"POST /nodes/{node}/qemu/{vmid}/status/resume":                "nocheck node skiplock vmid",
	"POST /nodes/{node}/lxc/{vmid}/status/start":                  "debug node skiplock vmid",
	"POST /nodes/{node}/lxc/{vmid}/status/stop":                   "node overrule-shutdown skiplock vmid",
	"POST /nodes/{node}/lxc/{vmid}/status/shutdown":               "forceStop node timeout vmid",
	"POST /nodes/{node}/lxc/{vmid}/status/reboot":                 "node timeout vmid",
	"POST /nodes/{node}/lxc/{vmid}/status/suspend":                "node vmid",
	"POST /nodes/{node}/lxc/{vmid}/status/resume":                 "node vmid",
}

// declaredConfig are the config keys PUT /nodes/{node}/{qemu,lxc}/{vmid}/config
// declares (the same as the create's), indexed ones as name[n]. Hand-kept
// with declaredParams.
var declaredConfig = map[Kind]*regexp.Regexp{
	QEMU: configKeyRe("acpi affinity agent allow-ksm amd-sev arch args audio0 autostart balloon bios boot bootdisk cdrom cicustom cipassword citype ciupgrade ciuser cores cpu cpulimit cpuunits description efidisk0 freeze hookscript hostpci[n] hotplug hugepages ide[n] intel-tdx ipconfig[n] ivshmem keephugepages keyboard kvm localtime lock machine memory migrate_downtime migrate_speed name nameserver net[n] numa numa[n] onboot ostype parallel[n] protection reboot rng0 sata[n] scsi[n] scsihw searchdomain serial[n] shares smbios1 smp sockets spice_enhancements sshkeys startdate startup tablet tags tdf template tpmstate0 unused[n] usb[n] vcpus vga virtio[n] virtiofs[n] vmgenid vmstatestorage watchdog"),
	LXC:  configKeyRe("arch cmode console cores cpulimit cpuunits debug description dev[n] entrypoint env features hookscript hostname lock memory mp[n] nameserver net[n] onboot ostype protection rootfs searchdomain startup swap tags template timezone tty unprivileged unused[n]"),
}

// declaredEnums are the enumerations the operations' schemas declare
// (API schema, each parameter's "enum"), hand-kept with declaredParams.
// check_prop refuses any other value: "value 'x' does not have a value in
// the enumeration 'a, b'". The "disk" enumerations of resize and template
// are their handlers'.
var declaredEnums = map[string]map[string]string{
	"GET /cluster/resources":                       {"type": "vm storage node sdn"},
	"GET /nodes/{node}/tasks":                      {"source": "archive active all"},
	"GET /cluster/ha/resources":                    {"type": "ct vm"},
	"POST /cluster/ha/resources":                   {"state": "started stopped enabled disabled ignored", "type": "ct vm"},
	"PUT /cluster/ha/resources/{sid}":              {"state": "started stopped enabled disabled ignored"},
	"GET /storage":                                 {"type": "btrfs cephfs cifs dir esxi iscsi iscsidirect lvm lvmthin nfs pbs rbd zfs zfspool"},
	"GET /nodes/{node}/network":                    {"type": "bridge bond eth alias vlan fabric OVSBridge OVSBond OVSPort OVSIntPort vnet any_bridge any_local_bridge include_sdn"},
	"GET /nodes/{node}/qemu/{vmid}/cloudinit/dump": {"type": "user network meta"},
	"GET /pools":                                   {"type": "qemu lxc storage"},
	"GET /pools/{poolid}":                          {"type": "qemu lxc storage"},
	"POST /nodes/{node}/qemu":                      {"arch": "x86_64 aarch64", "bios": "seabios ovmf", "citype": "configdrive2 nocloud opennebula", "hugepages": "any 2 1024", "keyboard": "de de-ch da en-gb en-us es fi fr fr-be fr-ca fr-ch hu is it ja lt mk nl no pl pt pt-br sv sl tr", "lock": "backup clone create migrate rollback snapshot snapshot-delete suspending suspended", "ostype": "other wxp w2k w2k3 w2k8 wvista win7 win8 win10 win11 l24 l26 solaris", "scsihw": "lsi lsi53c810 virtio-scsi-pci virtio-scsi-single megasas pvscsi"},
	"PUT /nodes/{node}/qemu/{vmid}/config":         {"arch": "x86_64 aarch64", "bios": "seabios ovmf", "citype": "configdrive2 nocloud opennebula", "hugepages": "any 2 1024", "keyboard": "de de-ch da en-gb en-us es fi fr fr-be fr-ca fr-ch hu is it ja lt mk nl no pl pt pt-br sv sl tr", "lock": "backup clone create migrate rollback snapshot snapshot-delete suspending suspended", "ostype": "other wxp w2k w2k3 w2k8 wvista win7 win8 win10 win11 l24 l26 solaris", "scsihw": "lsi lsi53c810 virtio-scsi-pci virtio-scsi-single megasas pvscsi"},
	"POST /nodes/{node}/qemu/{vmid}/clone":         {"format": "raw qcow2 vmdk"},
	"POST /nodes/{node}/qemu/{vmid}/migrate":       {"migration_type": "secure insecure"},
	"POST /nodes/{node}/lxc":                       {"arch": "amd64 i386 arm64 armhf riscv32 riscv64", "cmode": "shell console tty", "lock": "backup create destroyed disk fstrim migrate mounted rollback snapshot snapshot-delete", "ostype": "debian devuan ubuntu centos fedora opensuse archlinux alpine gentoo nixos unmanaged"},
	"PUT /nodes/{node}/lxc/{vmid}/config":          {"arch": "amd64 i386 arm64 armhf riscv32 riscv64", "cmode": "shell console tty", "lock": "backup create destroyed disk fstrim migrate mounted rollback snapshot snapshot-delete", "ostype": "debian devuan ubuntu centos fedora opensuse archlinux alpine gentoo nixos unmanaged"},
	"POST /nodes/{node}/qemu/{vmid}/config":        {"arch": "x86_64 aarch64", "bios": "seabios ovmf", "citype": "configdrive2 nocloud opennebula", "hugepages": "any 2 1024", "keyboard": "de de-ch da en-gb en-us es fi fr fr-be fr-ca fr-ch hu is it ja lt mk nl no pl pt pt-br sv sl tr", "lock": "backup clone create migrate rollback snapshot snapshot-delete suspending suspended", "ostype": "other wxp w2k w2k3 w2k8 wvista win7 win8 win10 win11 l24 l26 solaris", "scsihw": "lsi lsi53c810 virtio-scsi-pci virtio-scsi-single megasas pvscsi"},
	"POST /nodes/{node}/qemu/{vmid}/status/start":  {"migration_type": "secure insecure"},
}

// configKeyRe matches the listed keys, name[n] as name followed by digits.
func configKeyRe(keys string) *regexp.Regexp {
	alts := strings.Fields(keys)
	for i, k := range alts {
		if b, ok := strings.CutSuffix(k, "[n]"); ok {
			alts[i] = regexp.QuoteMeta(b) + `\d+`
		} else {
			alts[i] = regexp.QuoteMeta(k)
		}
	}
	return regexp.MustCompile(`^(?:` + strings.Join(alts, "|") + `)$`)
}

// schemaOp names the operation a request to a registered pattern is in
// the API schema: "{volume...}" is "{volume}", and the power pattern's
// {action} is the action the request names.
func schemaOp(r *http.Request, pattern string) string {
	op := strings.ReplaceAll(pattern, "...}", "}")
	if strings.Contains(op, "{action}") {
		op = strings.ReplaceAll(op, "{action}", r.PathValue("action"))
	}
	return op
}

// declaredCheck refuses the parameters op's schema does not declare and
// values outside its enumerations, all of them in one 400 as check_object
// collects them. An operation not
// in the list is left to its handler, and so is one with config keys
// ("@config"), whose handler reports these errors with its own
// (declaredErrors), as check_object reports all of a request's at once.
func declaredCheck(op string, params map[string]string) error {
	if strings.HasSuffix(declaredParams[op], "@config") {
		return nil
	}
	if errs := declaredErrors(op, params); len(errs) > 0 {
		return paramErr(errs)
	}
	return nil
}

// declaredErrors are check_object's errors for the parameters op's
// schema does not declare and for values outside its enumerations.
func declaredErrors(op string, params map[string]string) map[string]string {
	decl, ok := declaredParams[op]
	if !ok {
		return nil
	}
	known := map[string]bool{}
	for _, k := range strings.Fields(decl) {
		known[k] = true
	}
	kind := QEMU
	if strings.Contains(op, "/lxc") {
		kind = LXC
	}
	errs := map[string]string{}
	for k := range params {
		if known[k] || (known["@config"] && declaredConfig[kind].MatchString(k)) {
			continue
		}
		errs[k] = "property is not defined in schema and the schema does not allow additional properties"
	}
	for k, vals := range declaredEnums[op] {
		// An empty value is left to the handler (an empty description
		// deletes it in a config write).
		if v, ok := params[k]; ok && v != "" && !slices.Contains(strings.Fields(vals), v) {
			errs[k] = fmt.Sprintf("value '%s' does not have a value in the enumeration '%s'", v, strings.Join(strings.Fields(vals), ", "))
		}
	}
	return errs
}

// resolveCdromAlias is qemu-server's $resolve_cdrom_alias (src/PVE/API2/Qemu.pm,
// create and config update): a non-empty cdrom is ide2, with ",media=cdrom"
// unless it names a media.
func resolveCdromAlias(params map[string]string) {
	v := params["cdrom"]
	if v == "" {
		return
	}
	if !strings.Contains(v, "media=") {
		v += ",media=cdrom"
	}
	params["ide2"] = v
	delete(params, "cdrom")
}
