package pvesim

import (
	"net/http/httptest"
	"testing"
)

// BenchmarkInventoryAnswer answers GET /cluster/resources?type=vm for
// 10,000 guests, rows read and encoded (paced, as served): the
// simulator's share of every observer pass in the benchmarks.
func BenchmarkInventoryAnswer(b *testing.B) {
	s, err := New(Options{Nodes: 3, Guests: 10000})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		v, err := s.clusterResources(&req{params: map[string]string{"type": "vm"}})
		if err != nil {
			b.Fatal(err)
		}
		writeData(httptest.NewRecorder(), v)
	}
}
