package events

// Typed decoders of the operation parameters of actions (fastevents.go).

// fastPtr reads an object into *p (allocated if nil, as encoding/json
// does); null is nil.
func fastPtr[T any](s *scanner, p *T, decode func(*T, *scanner)) *T {
	if s.null() {
		return nil
	}
	if p == nil {
		p = new(T)
	}
	decode(p, s)
	return p
}

// members reads an object's members, calling fn with each name; fn reads
// the value (or skips it).
func (s *scanner) members(fn func(k []byte)) {
	if !s.object() {
		return
	}
	for n := 0; ; {
		k, ok := s.field(&n)
		if !ok {
			return
		}
		fn(k)
	}
}

func (c *CloneOp) decodeFast(s *scanner) {
	s.members(func(k []byte) {
		switch string(k) {
		case "from":
			c.From = s.int()
		case "from_node":
			c.FromNode = s.str()
		case "full":
			c.Full = s.bool()
		case "storage":
			c.Storage = s.str()
		case "pool":
			c.Pool = s.str()
		case "name":
			c.Name = s.str()
		case "source_storage":
			c.SourceStorage = s.str()
		default:
			s.skip()
		}
	})
}

func (r *ResizeOp) decodeFast(s *scanner) {
	s.members(func(k []byte) {
		switch string(k) {
		case "disk":
			r.Disk = s.str()
		case "size_gib":
			r.SizeGiB = s.int64()
		default:
			s.skip()
		}
	})
}

func (m *MigrateOp) decodeFast(s *scanner) {
	s.members(func(k []byte) {
		switch string(k) {
		case "target":
			m.Target = s.str()
		case "online":
			m.Online = s.bool()
		case "restart":
			m.Restart = s.bool()
		case "ha":
			m.HA = s.bool()
		default:
			s.skip()
		}
	})
}

func (p *PoolOp) decodeFast(s *scanner) {
	s.members(func(k []byte) {
		switch string(k) {
		case "from":
			p.From = s.str()
		case "to":
			p.To = s.str()
		case "create":
			p.Create = s.bool()
		default:
			s.skip()
		}
	})
}

func (o *SnapshotOp) decodeFast(s *scanner) {
	s.members(func(k []byte) {
		switch string(k) {
		case "name":
			o.Name = s.str()
		case "before":
			o.Before = Op(s.str())
		case "keep":
			o.Keep = s.int()
		default:
			s.skip()
		}
	})
}
