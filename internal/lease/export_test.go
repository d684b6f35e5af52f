package lease

// AfterRound makes m call f after each round of Run, before it waits for
// the next one, so that a test driving a fake clock knows when a round is
// over. Call it before Run.
func AfterRound(m *Manager, f func()) { m.roundDone = f }

// Drained waits until every OnRelease that m's rounds have started has
// returned, so that m's next round hands those partitions over.
func Drained(m *Manager) {
	m.mu.Lock()
	var releasing []chan struct{}
	for _, h := range m.held {
		if h.releasing != nil {
			releasing = append(releasing, h.releasing)
		}
	}
	m.mu.Unlock()
	for _, c := range releasing {
		<-c
	}
}
