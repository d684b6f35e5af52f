package pvesim

import "strings"

// ---- QEMU hotplug decisions ------------------------------------------------------
//
// What a running VM takes at once and what stays in [PENDING] follows
// qemu-server's vmconfig_hotplug_pending and the applied "hotplug" key
// (parse_hotplug_features: default "network,disk,usb", "1" means that
// default, "0" none).

// hotplugFeatures is the running VM's applied hotplug feature set.
func hotplugFeatures(g *guest) map[string]bool {
	v, ok := g.conf["hotplug"]
	if !ok || v == "1" {
		v = "network,disk,usb"
	}
	out := map[string]bool{}
	if v == "0" {
		return out
	}
	for _, f := range splitList(v) {
		out[f] = true
	}
	return out
}

// driveOpts parses a drive option string into its volume (or file) and
// options.
func driveOpts(v string) (string, map[string]string) {
	parts := strings.Split(v, ",")
	opts := map[string]string{}
	file := ""
	for i, p := range parts {
		k, val, ok := strings.Cut(p, "=")
		if i == 0 && (!ok || k == "file") {
			file = p
			if ok {
				file = val
			}
			continue
		}
		opts[k] = val
	}
	return file, opts
}

// driveHotplug is vmconfig_update_disk's decision for a running VM: an
// existing cdrom changes its medium live; an existing disk with the same
// volume takes throttling changes live but not aio, cache, discard,
// iothread, queues, product, vendor, ssd or ro; a new volume needs disk
// hotplug and is never plugged on IDE or SATA; EFI and TPM state never.
func driveHotplug(g *guest, key, v string, feats map[string]bool) bool {
	if key == "efidisk0" || key == "tpmstate0" {
		return false
	}
	newFile, newOpts := driveOpts(v)
	if old, ok := g.conf[key]; ok {
		oldFile, oldOpts := driveOpts(old)
		if newOpts["media"] != oldOpts["media"] {
			return false // "unable to change media type": kept pending
		}
		if oldOpts["media"] == "cdrom" {
			return true
		}
		if newFile == oldFile {
			for _, k := range []string{"aio", "discard", "iothread", "queues", "product", "cache", "ssd", "vendor", "ro"} {
				if newOpts[k] != oldOpts[k] {
					return false
				}
			}
			return true
		}
		return feats["disk"]
	}
	return feats["disk"] && !strings.HasPrefix(key, "ide") && !strings.HasPrefix(key, "sata")
}

// qemuHotplugSet reports whether a running VM applies a new value of key
// at once.
func qemuHotplugSet(g *guest, key, v string) bool {
	feats := hotplugFeatures(g)
	switch {
	case key == "hotplug":
		// Changing memory or CPU hotplug needs a restart.
		return !strings.Contains(v, "memory") && !strings.Contains(g.conf["hotplug"], "memory") &&
			!strings.Contains(v, "cpu") && !strings.Contains(g.conf["hotplug"], "cpu")
	case key == "tablet":
		return feats["usb"]
	case strings.HasPrefix(key, "usb") && indexedKeys[QEMU].MatchString(key):
		return feats["usb"]
	case key == "vcpus":
		return feats["cpu"]
	case key == "memory":
		// qemu_memory_hotplug refuses without NUMA: the value stays pending.
		return feats["memory"] && g.conf["numa"] == "1"
	case driveKeyRe.MatchString(key):
		return driveHotplug(g, key, v, feats)
	}
	return hotpluggable(g, key)
}

// hotplugSet reports whether a running guest applies a new value of key at
// once (LXC by key only).
func hotplugSet(g *guest, key, v string) bool {
	if g.kind == QEMU {
		return qemuHotplugSet(g, key, v)
	}
	return hotpluggable(g, key)
}
