package pvesim

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// ---- disk resize (PUT …/{vmid}/resize) ----------------------------------------
//
// qemu-server's resize_vm and pve-container's resize_vm: grow a disk or
// mount point to an absolute size or by "+N". The new size is written into
// the volume's option string at once (it is not a pending change, also on a
// running guest with other changes pending). QEMU answers null and resizes
// synchronously up to qemu-server 8.0.1 (PVE 7 here), a "resize" task from
// 8.0.2 (fix #2315), with every check inside the worker; LXC checks up
// front, then forks a "resize" task.

// resizeSizeRe is the size parameter's pattern ('\+?\d+(\.\d+)?[KMGT]?').
var resizeSizeRe = regexp.MustCompile(`^(\+)?(\d+(?:\.\d+)?)([KMGT])?$`)

// qemuDriveNames is PVE::QemuServer::Drive::valid_drive_names, the
// resize's "disk" enumeration.
var qemuDriveNames = func() []string {
	var out []string
	add := func(prefix string, n int) {
		for i := 0; i < n; i++ {
			out = append(out, fmt.Sprintf("%s%d", prefix, i))
		}
	}
	add("ide", 4)
	add("sata", 6)
	add("scsi", 31)
	add("virtio", 16)
	return append(out, "efidisk0", "tpmstate0")
}()

// lxcVolumeKeys is PVE::LXC::Config->valid_volume_keys: rootfs, mp0..mp255.
var lxcVolumeKeys = func() []string {
	out := []string{"rootfs"}
	for i := 0; i < 256; i++ {
		out = append(out, fmt.Sprintf("mp%d", i))
	}
	return out
}()

func enumParam(name, v string, values []string) error {
	for _, x := range values {
		if x == v {
			return nil
		}
	}
	return paramErr1(name, "value '%s' does not have a value in the enumeration '%s'", v, strings.Join(values, ", "))
}

// formatSize is PVE::JSONSchema::format_size: the largest unit that
// divides the byte count exactly.
func formatSize(n int64) string {
	kb := n / 1024
	if kb*1024 != n {
		return strconv.FormatInt(n, 10)
	}
	mb := kb / 1024
	if mb*1024 != kb {
		return fmt.Sprintf("%dK", kb)
	}
	gb := mb / 1024
	if gb*1024 != mb {
		return fmt.Sprintf("%dM", mb)
	}
	tb := gb / 1024
	if tb*1024 != gb {
		return fmt.Sprintf("%dG", gb)
	}
	return fmt.Sprintf("%dT", tb)
}

// optionSize is the size= of a drive or mount point option, in bytes.
func optionSize(v string) (int64, bool) {
	for _, part := range strings.Split(v, ",") {
		if sz, ok := strings.CutPrefix(part, "size="); ok {
			return parseSize(sz), true
		}
	}
	return 0, false
}

// withSize rewrites the size= of an option string (appending it if absent).
func withSize(v string, n int64) string {
	parts := strings.Split(v, ",")
	for i, p := range parts {
		if strings.HasPrefix(p, "size=") {
			parts[i] = "size=" + formatSize(n)
			return strings.Join(parts, ",")
		}
	}
	return v + ",size=" + formatSize(n)
}

type resizeReq struct {
	disk      string
	ext       bool
	bytes     int64
	digest    string
	skiplock  bool
	sizeParam string
}

func (s *Sim) parseResize(q *req, g *guest) (*resizeReq, error) {
	errs := map[string]string{}
	for _, k := range []string{"disk", "size"} {
		if !q.has(k) {
			errs[k] = "property is missing and it is not optional"
		}
	}
	if len(errs) > 0 {
		return nil, paramErr(errs)
	}
	names := qemuDriveNames
	if g.kind == LXC {
		names = lxcVolumeKeys
	}
	if err := enumParam("disk", q.str("disk"), names); err != nil {
		return nil, err
	}
	m := resizeSizeRe.FindStringSubmatch(q.str("size"))
	if m == nil {
		return nil, paramErr1("size", "value does not match the regex pattern")
	}
	if d := q.str("digest"); len(d) > 40 {
		return nil, paramErr1("digest", "value may only be 40 characters long")
	}
	skiplock, err := q.boolParam("skiplock")
	if err != nil {
		return nil, err
	}
	if g.kind == LXC && q.has("skiplock") {
		return nil, paramErr1("skiplock", "property is not defined in schema and the schema does not allow additional properties")
	}
	f, _ := strconv.ParseFloat(m[2], 64)
	switch m[3] {
	case "K":
		f *= 1 << 10
	case "M":
		f *= 1 << 20
	case "G":
		f *= 1 << 30
	case "T":
		f *= 1 << 40
	}
	return &resizeReq{disk: q.str("disk"), ext: m[1] == "+", bytes: int64(f), digest: q.str("digest"),
		skiplock: skiplock, sizeParam: q.str("size")}, nil
}

// qemuResizeCheck is the QEMU worker's checks; it returns the new size, or
// 0 when the disk is already that size (a no-op that succeeds).
func (s *Sim) qemuResizeCheck(g *guest, r *resizeReq) (int64, error) {
	if r.digest != "" && r.digest != g.digest {
		return 0, fmt.Errorf("checksum mismatch (file change by other user?)")
	}
	if g.lock() != "" && !r.skiplock {
		return 0, fmt.Errorf("%s", lockedErr(g))
	}
	v, ok := g.conf[r.disk]
	if !ok {
		return 0, fmt.Errorf("disk '%s' does not exist", r.disk)
	}
	if strings.Contains(","+v+",", ",media=cdrom,") || strings.HasPrefix(v, "none,") || v == "none" || v == "cdrom" {
		return 0, fmt.Errorf("you can't resize a cdrom")
	}
	if _, has := volumeStorage(v); !has {
		return 0, fmt.Errorf("disk '%s' has no associated volume", r.disk)
	}
	cur, _ := optionSize(v)
	n := r.bytes
	if r.ext {
		n += cur
	}
	if n < cur {
		return 0, fmt.Errorf("shrinking disks is not supported")
	}
	if n == cur {
		return 0, nil
	}
	return n, nil
}

// lxcResizeCheck is pve-container's load_and_check.
func (s *Sim) lxcResizeCheck(g *guest, r *resizeReq) (int64, error) {
	if g.lock() != "" {
		return 0, fmt.Errorf("%s", lockedErr(g))
	}
	if r.digest != "" && r.digest != g.digest {
		//lint:ignore ST1005 Proxmox's own message (PVE::Tools::assert_if_modified), which clients match
		return 0, fmt.Errorf("detected modified configuration - file changed by other user? Try again.")
	}
	v, ok := g.conf[r.disk]
	if !ok {
		// parse_property_string of an empty mount point
		return 0, fmt.Errorf("format error")
	}
	cur, _ := optionSize(v)
	n := r.bytes
	if r.ext {
		n += cur
	}
	if n < cur {
		return 0, fmt.Errorf("unable to shrink disk size")
	}
	if n == cur {
		return 0, fmt.Errorf("disk is already at specified size")
	}
	return n, nil
}

func (s *Sim) resize(q *req, g *guest) (any, error) {
	r, err := s.parseResize(q, g)
	if err != nil {
		return nil, err
	}
	if g.kind == LXC {
		if _, err := s.lxcResizeCheck(g, r); err != nil {
			return nil, fail500("%s", err)
		}
		t := s.startTask(g.node, "resize", g.kind, g.vmid, q.user, func() ([]string, error) {
			if err := s.gone(g); err != nil {
				return nil, err
			}
			n, err := s.lxcResizeCheck(g, r)
			if err != nil {
				return nil, taskError(err.Error())
			}
			g.conf[r.disk] = withSize(g.conf[r.disk], n)
			g.touch()
			return nil, nil
		}, nil)
		return t.upid, nil
	}
	apply := func() error {
		n, err := s.qemuResizeCheck(g, r)
		if err != nil || n == 0 {
			return err
		}
		g.conf[r.disk] = withSize(g.conf[r.disk], n)
		g.touch()
		return nil
	}
	if s.version.memoryAsNumber { // PVE 7: qemu-server < 8.0.2 resizes in the API call
		if s.roll(s.faults.FailRate) {
			return nil, fail500("%s", s.failMessage(g.kind, g.vmid))
		}
		if err := apply(); err != nil {
			return nil, fail500("%s", err)
		}
		return nil, nil
	}
	t := s.startTask(g.node, "resize", g.kind, g.vmid, q.user, func() ([]string, error) {
		if err := s.gone(g); err != nil {
			return nil, err
		}
		if err := apply(); err != nil {
			return nil, taskError(err.Error())
		}
		return nil, nil
	}, nil)
	return t.upid, nil
}
