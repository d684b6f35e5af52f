package events

import "time"

// Typed decoders of the events every change brings: actions, results and
// observations (the planner folds each one, the executor reads them back
// for its fences). They read a body in one pass into exactly the values
// encoding/json gives (scanner says what they leave to Decode's general
// path), allocating only the values themselves: the general path copies
// the body first and then every string out of that copy (detach).
// TestFastDecodeAgrees and FuzzFastDecode hold them to encoding/json and
// to the general path.

// decodeFast decodes body into p if p is one of the typed decoders' and
// the body is theirs to read; false leaves p partly written.
func decodeFast(p any, body []byte) bool {
	s := scanner{b: body}
	switch p := p.(type) {
	case *Action:
		p.decodeFast(&s)
	case *Result:
		p.decodeFast(&s)
	case *Observed:
		p.decodeFast(&s)
	default:
		return false
	}
	return s.end()
}

func (m *Meta) field(s *scanner, k []byte) bool {
	switch string(k) {
	case "schema":
		m.Schema = s.int()
	case "publisher":
		m.Publisher = s.str()
	case "correlation_id":
		m.CorrelationID = s.str()
	case "time":
		m.Time = s.time()
	default:
		return false
	}
	return true
}

func (o *Observed) decodeFast(s *scanner) {
	if !s.object() {
		return
	}
	for n := 0; ; {
		k, ok := s.field(&n)
		if !ok {
			return
		}
		switch string(k) {
		case "vmid":
			o.VMID = s.int()
		case "cluster":
			o.Cluster = s.sym()
		case "exists":
			o.Exists = s.bool()
		case "node":
			o.Node = s.str()
		case "kind":
			o.Kind = GuestKind(s.sym())
		case "status":
			o.Status = s.sym()
		case "lock":
			o.Lock = s.str()
		case "template":
			o.Template = s.bool()
		case "digest":
			o.Digest = s.str()
		case "protected":
			o.Protected = s.bool()
		case "ha":
			o.HA = s.str()
		case "pool":
			o.Pool = s.str()
		case "config":
			o.Config.decodeFast(s)
		case "pending":
			o.Pending = s.stringMap(o.Pending)
		case "read_at":
			o.ReadAt = s.time()
		case "source":
			o.Source = s.sym()
		case "after_seq":
			o.AfterSeq = s.uint64()
		default:
			if !o.Meta.field(s, k) {
				s.skip()
			}
		}
	}
}

func (c *GuestConfig) decodeFast(s *scanner) {
	if !s.object() {
		return
	}
	for n := 0; ; {
		k, ok := s.field(&n)
		if !ok {
			return
		}
		switch string(k) {
		case "name":
			c.Name = s.str()
		case "description":
			c.Description = s.str()
		case "tags":
			c.Tags = s.strings()
		case "cores":
			c.Cores = s.int()
		case "memory_mib":
			c.MemoryMiB = s.int()
		case "onboot":
			c.OnBoot = s.bool()
		case "disks":
			c.Disks = s.disks(c.Disks)
		case "net":
			c.Net = s.stringMap(c.Net)
		case "cloudinit":
			c.CloudInit = s.stringMap(c.CloudInit)
		case "hotplug":
			c.Hotplug = s.str()
		case "numa":
			c.NUMA = s.bool()
		default:
			s.skip()
		}
	}
}

// disks reads an object of disks into m (made if nil); each value starts
// from a zero Disk, as encoding/json's map elements do.
func (s *scanner) disks(m map[string]Disk) map[string]Disk {
	if s.null() {
		return nil
	}
	if !s.object() {
		return m
	}
	if m == nil {
		m = map[string]Disk{}
	}
	for n := 0; ; {
		key, ok := s.key(&n)
		if !ok || !s.object() {
			return m
		}
		var d Disk
		for n := 0; ; {
			k, ok := s.field(&n)
			if !ok {
				break
			}
			switch string(k) {
			case "volume":
				d.Volume = s.str()
			case "size_bytes":
				d.SizeBytes = s.int64()
			case "media":
				d.Media = s.str()
			default:
				s.skip()
			}
		}
		m[key] = d
	}
}

func (a *Action) decodeFast(s *scanner) {
	if !s.object() {
		return
	}
	for n := 0; ; {
		k, ok := s.field(&n)
		if !ok {
			return
		}
		switch string(k) {
		case "id":
			a.ID = s.str()
		case "vmid":
			a.VMID = s.int()
		case "cluster":
			a.Cluster = s.sym()
		case "node":
			a.Node = s.str()
		case "kind":
			a.Kind = GuestKind(s.sym())
		case "op":
			a.Op = Op(s.sym())
		case "set":
			a.Set = s.stringMap(a.Set)
		case "delete":
			a.Delete = s.strings()
		case "revert":
			a.Revert = s.strings()
		case "holds":
			a.Holds = Op(s.sym())
		case "clone":
			a.Clone = fastPtr(s, a.Clone, (*CloneOp).decodeFast)
		case "resize":
			a.Resize = fastPtr(s, a.Resize, (*ResizeOp).decodeFast)
		case "migrate":
			a.Migrate = fastPtr(s, a.Migrate, (*MigrateOp).decodeFast)
		case "pool":
			a.Pool = fastPtr(s, a.Pool, (*PoolOp).decodeFast)
		case "snapshot":
			a.Snapshot = fastPtr(s, a.Snapshot, (*SnapshotOp).decodeFast)
		case "ha_state":
			a.HAState = s.str()
		case "digest":
			a.Digest = s.str()
		case "timeout_ns":
			a.Timeout = time.Duration(s.int64())
		case "reason":
			a.Reason = s.str()
		case "desired_seq":
			a.DesiredSeq = s.uint64()
		case "basis_seq":
			a.BasisSeq = s.uint64()
		case "observation_seq":
			a.ObservationSeq = s.uint64()
		case "fold_seq":
			a.FoldSeq = s.uint64()
		case "attempt":
			a.Attempt = s.int()
		default:
			if !a.Meta.field(s, k) {
				s.skip()
			}
		}
	}
}

func (r *Result) decodeFast(s *scanner) {
	if !s.object() {
		return
	}
	for n := 0; ; {
		k, ok := s.field(&n)
		if !ok {
			return
		}
		switch string(k) {
		case "action_id":
			r.ActionID = s.str()
		case "vmid":
			r.VMID = s.int()
		case "cluster":
			r.Cluster = s.sym()
		case "op":
			r.Op = Op(s.sym())
		case "status":
			r.Status = ResultStatus(s.sym())
		case "upid":
			r.UPID = s.str()
		case "node":
			r.Node = s.str()
		case "error":
			r.Error = s.str()
		case "error_class":
			r.ErrorClass = ErrorClass(s.sym())
		case "warnings":
			r.Warnings = s.int()
		case "task_log":
			r.TaskLog = s.strings()
		case "reason":
			r.Reason = s.str()
		case "observed":
			r.Observed = fastPtr(s, r.Observed, (*Observed).decodeFast)
		case "executor":
			r.Executor = s.str()
		default:
			if !r.Meta.field(s, k) {
				s.skip()
			}
		}
	}
}
