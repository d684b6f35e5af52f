package events

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Kind is an event kind, the second token of its subject.
type Kind string

// Event kinds. Desired, observed, action and result are per guest (and
// addresses, addresses.go); heartbeat and control are per cluster.
const (
	KindDesired   Kind = "desired"
	KindObserved  Kind = "observed"
	KindAction    Kind = "action"
	KindResult    Kind = "result"
	KindHeartbeat Kind = "heartbeat"
	KindControl   Kind = "control"
)

// Prefix is the first token of every converge subject.
const Prefix = "pve"

// DefaultCluster is the cluster id used when none is configured.
const DefaultCluster = "pve"

// VMID limits, as Proxmox enforces them.
const (
	MinVMID = 100
	MaxVMID = 999999999
)

var clusterRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidateCluster checks a cluster id: a single subject token.
func ValidateCluster(c string) error {
	if !clusterRe.MatchString(c) {
		return fmt.Errorf("cluster %q: want 1-64 letters, digits, '-' or '_'", c)
	}
	return nil
}

// Subject is where a guest's event of the given kind is published.
func Subject(kind Kind, cluster string, vmid int) string {
	return Prefix + "." + string(kind) + "." + cluster + "." + strconv.Itoa(vmid)
}

// ClusterSubject is where a cluster-wide event (heartbeat, control) goes.
func ClusterSubject(kind Kind, cluster string) string {
	return Prefix + "." + string(kind) + "." + cluster
}

// StoredFilter matches the stored subjects of one guest's events of a kind,
// whatever partition they landed in.
func StoredFilter(kind Kind, cluster string, vmid int) string {
	return Subject(kind, cluster, vmid) + ".*"
}

// SubjectInfo is what a subject says about an event.
type SubjectInfo struct {
	Kind      Kind
	Cluster   string
	VMID      int // 0 for cluster-wide events
	Partition int // -1 when the subject carries none (as published)
}

// ParseSubject reads a published (pve.kind.cluster[.vmid]) or stored
// (pve.kind.cluster.vmid.partition) subject. A vmid must be written in
// canonical decimal (no sign, no leading zeros) within MinVMID..MaxVMID.
func ParseSubject(s string) (SubjectInfo, error) {
	// Split into an array, not strings.Split's slice: a subject is parsed
	// for every event folded and every action handled.
	var t [5]string
	n := 0 // tokens; len(t)+1 for more than any converge subject has
	for rest := s; ; {
		if n == len(t) {
			n++
			break
		}
		i := strings.IndexByte(rest, '.')
		if i < 0 {
			t[n] = rest
			n++
			break
		}
		t[n], rest = rest[:i], rest[i+1:]
		n++
	}
	if n < 3 || t[0] != Prefix {
		return SubjectInfo{}, fmt.Errorf("subject %q: not a converge subject", s)
	}
	info := SubjectInfo{Kind: Kind(t[1]), Cluster: t[2], Partition: -1}
	switch info.Kind {
	case KindHeartbeat, KindControl:
		if n != 3 {
			return SubjectInfo{}, fmt.Errorf("subject %q: want %s.%s.<cluster>", s, Prefix, info.Kind)
		}
		return info, nil
	case KindDesired, KindObserved, KindAction, KindResult, KindAddresses:
	default:
		return SubjectInfo{}, fmt.Errorf("subject %q: unknown event kind %q", s, t[1])
	}
	if n != 4 && n != 5 {
		return SubjectInfo{}, fmt.Errorf("subject %q: want %s.%s.<cluster>.<vmid>", s, Prefix, info.Kind)
	}
	vmid, err := strconv.Atoi(t[3])
	if err != nil || !canonicalDecimal(t[3]) || vmid < MinVMID || vmid > MaxVMID {
		return SubjectInfo{}, fmt.Errorf("subject %q: vmid %q is not a decimal number within %d..%d", s, t[3], MinVMID, MaxVMID)
	}
	info.VMID = vmid
	if n == 5 {
		p, err := strconv.Atoi(t[4])
		if err != nil || p < 0 {
			return SubjectInfo{}, fmt.Errorf("subject %q: bad partition %q", s, t[4])
		}
		info.Partition = p
	}
	return info, nil
}

// canonicalDecimal: digits only, without a leading zero (what
// strconv.Itoa writes for a positive number, without allocating it).
func canonicalDecimal(s string) bool {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Partition is the partition a guest's events are stored in, for a stream
// of n partitions: FNV-1a of cluster and vmid, as the stream's subject
// transform {{partition(n,2,3)}} computes it (the tokens concatenated).
func Partition(cluster string, vmid, n int) int {
	if n <= 0 {
		return 0
	}
	h := uint32(2166136261)
	for _, s := range [2]string{cluster, strconv.Itoa(vmid)} {
		for i := 0; i < len(s); i++ {
			h ^= uint32(s[i])
			h *= 16777619
		}
	}
	return int(h % uint32(n))
}

// StoredSubject is the literal stored subject of a guest's events of a
// kind: reading by it is a lookup, where a wildcard filter makes the server
// search its subject tree. vmid 0 names the cluster-wide subject of kind,
// and a cluster-wide kind (heartbeats, control) is stored on it whatever
// vmid: as published.
func StoredSubject(kind Kind, cluster string, vmid, partitions int) string {
	if vmid == 0 || kind.ClusterWide() {
		return ClusterSubject(kind, cluster) // heartbeats and control: not partitioned
	}
	return Subject(kind, cluster, vmid) + "." + strconv.Itoa(Partition(cluster, vmid, partitions))
}

// CheckPartition refuses a stored subject whose partition is not the one
// its guest's events are stored in, for a stream of n partitions. Such an
// event did not come through the stream's partition transform (it was
// published on a stored-form subject, before the journal took only the
// shapes converge publishes): no partition's reader, lease or fence sees
// it, so it is never acted on. A subject without a partition (as
// published) or of a cluster-wide event passes.
func (i SubjectInfo) CheckPartition(n int) error {
	if i.Partition < 0 || i.VMID == 0 || n <= 0 {
		return nil
	}
	if want := Partition(i.Cluster, i.VMID, n); i.Partition != want {
		return fmt.Errorf("%s event of guest %d stored under partition %d, not %d: it skipped the journal's partition transform; ignored",
			i.Kind, i.VMID, i.Partition, want)
	}
	return nil
}

// ClusterWide reports whether events of kind k are the cluster's
// (heartbeats, operators' requests): stored on one subject, without a vmid.
func (k Kind) ClusterWide() bool { return k == KindHeartbeat || k == KindControl }
