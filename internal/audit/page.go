package audit

import "slices"

// Page is one page of a timeline for a client that reads it newest first
// (the HTTP API): at most limit entries of es (in stream order) older than
// before (0: from the newest), newest first. next is the sequence of the
// oldest entry returned when older ones exist (the next page's before),
// else 0.
func Page(es []Entry, before uint64, limit int) (page []Entry, next uint64) {
	end := len(es)
	if before > 0 {
		end, _ = slices.BinarySearchFunc(es, before, func(e Entry, seq uint64) int {
			switch {
			case e.Seq < seq:
				return -1
			case e.Seq > seq:
				return 1
			}
			return 0
		})
	}
	start := max(0, end-limit)
	page = make([]Entry, 0, end-start)
	for i := end - 1; i >= start; i-- {
		page = append(page, es[i])
	}
	if start > 0 && len(page) > 0 {
		next = page[len(page)-1].Seq
	}
	return page, next
}
