package pvesim

import "slices"

// ServedPatterns are the patterns the simulator registered, in order
// ("GET /nodes/{node}/qemu"), for tests derived from the route table.
func (s *Sim) ServedPatterns() []string { return slices.Clone(s.served) }
