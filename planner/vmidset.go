package planner

// vmidSet is a set of vmids kept as a sparse bitmap: one 64-bit word per
// 64 consecutive vmids that holds any. Proxmox hands out vmids in sequence
// (its next free id), so an estate's are mostly dense and a word holds
// many guests: at 100,000 guests a set costs well under 1 B a guest where
// a map entry costs about 22 B (BenchmarkPlannerMemory). Vmids spread
// apart cost one word each, no more than a map's entry. The zero value is
// an empty set, ready to use.
type vmidSet struct {
	words map[int]uint64 // vmid>>6 → bit vmid&63
	n     int
}

func vmidBit(vmid int) (word int, bit uint64) {
	return vmid >> 6, 1 << uint(vmid&63)
}

func (s *vmidSet) has(vmid int) bool {
	w, b := vmidBit(vmid)
	return s.words[w]&b != 0
}

func (s *vmidSet) add(vmid int) {
	w, b := vmidBit(vmid)
	if s.words[w]&b != 0 {
		return
	}
	if s.words == nil {
		s.words = map[int]uint64{}
	}
	s.words[w] |= b
	s.n++
}

func (s *vmidSet) remove(vmid int) {
	w, b := vmidBit(vmid)
	x := s.words[w]
	if x&b == 0 {
		return
	}
	if x &^= b; x == 0 {
		delete(s.words, w) // an empty word is dropped: no room kept for guests gone
	} else {
		s.words[w] = x
	}
	s.n--
}

// len is the number of vmids in the set.
func (s *vmidSet) len() int { return s.n }
