package observer

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
)

// TestSnapOfPending decodes real PVE payloads (GET …/config?current=1 and
// GET …/pending) and checks the managed pending keys and their normalised
// values.
func TestSnapOfPending(t *testing.T) {
	for _, tc := range []struct {
		name            string
		kind            pve.Kind
		config, pending string
		wantCfg         events.GuestConfig
		wantPending     map[string]string
	}{{
		name:   "qemu cores and memory wait for a reboot",
		kind:   pve.KindQEMU,
		config: `{"name":"web","cores":1,"memory":"1024","tags":"b;a","onboot":1,"digest":"abc","description":"hi\n"}`,
		pending: `[{"key":"cores","value":1,"pending":4},{"key":"memory","value":"1024","pending":"current=4096"},
			{"key":"name","value":"web"},{"key":"net0","value":"virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr0","pending":"virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr1"}]`,
		wantCfg:     events.GuestConfig{Name: "web", Description: "hi", Tags: []string{"a", "b"}, Cores: 1, MemoryMiB: 1024, OnBoot: true},
		wantPending: map[string]string{"cores": "4", "memory": "4096", "net0": "virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr1"},
	}, {
		name:    "absent keys take defaults, tags never nil",
		kind:    pve.KindQEMU,
		config:  `{"digest":"abc"}`,
		pending: `[]`,
		wantCfg: events.GuestConfig{Tags: []string{}, Cores: 1, MemoryMiB: 512},
	}, {
		name:        "lxc hostname is reported as name; pending deletions read as defaults",
		kind:        pve.KindLXC,
		config:      `{"hostname":"ct1","cores":2,"memory":2048,"onboot":1,"tags":"x","digest":"d"}`,
		pending:     `[{"key":"hostname","value":"ct1","pending":"ct2"},{"key":"cores","value":2,"delete":1},{"key":"onboot","value":1,"delete":1},{"key":"tags","value":"x","pending":"Y,x;x"}]`,
		wantCfg:     events.GuestConfig{Name: "ct1", Tags: []string{"x"}, Cores: 2, MemoryMiB: 2048, OnBoot: true},
		wantPending: map[string]string{"name": "ct2", "cores": "0", "onboot": "0", "tags": "x;y"},
	}, {
		name:    "a pending value equal to the applied one is not pending",
		kind:    pve.KindQEMU,
		config:  `{"cores":2,"memory":"2048","onboot":0,"digest":"d"}`,
		pending: `[{"key":"cores","value":2,"pending":"2"},{"key":"memory","value":"2048","pending":"2048"},{"key":"onboot","value":0,"pending":0}]`,
		wantCfg: events.GuestConfig{Tags: []string{}, Cores: 2, MemoryMiB: 2048},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := pve.DecodeGuestConfig(pve.GuestRef{Kind: tc.kind, Node: "pve1", VMID: 100}, []byte(tc.config), []byte(tc.pending))
			if err != nil {
				t.Fatal(err)
			}
			s := snapOf(g)
			c := s.Config
			if c.Name != tc.wantCfg.Name || c.Description != tc.wantCfg.Description || c.Cores != tc.wantCfg.Cores ||
				c.MemoryMiB != tc.wantCfg.MemoryMiB || c.OnBoot != tc.wantCfg.OnBoot || c.Tags == nil ||
				len(c.Tags) != len(tc.wantCfg.Tags) || (len(c.Tags) > 0 && c.Tags[0] != tc.wantCfg.Tags[0]) {
				t.Fatalf("config %+v, want %+v", c, tc.wantCfg)
			}
			if !maps.Equal(s.Pending, tc.wantPending) || (tc.wantPending == nil) != (s.Pending == nil) {
				t.Fatalf("pending %v, want %v", s.Pending, tc.wantPending)
			}
			if s.Digest == "" {
				t.Fatal("digest lost")
			}
		})
	}
}

func TestSameObservation(t *testing.T) {
	base := func() *events.Observed {
		return &events.Observed{VMID: 100, Cluster: "pve", Exists: true, Node: "pve1", Kind: events.QEMU, Status: "running",
			Digest: "d", Config: events.GuestConfig{Tags: []string{"a"}, Cores: 1, MemoryMiB: 512},
			Pending: map[string]string{"cores": "2"}, ReadAt: time.Unix(1, 0), Source: events.SourceObserver}
	}
	a := base()
	b := base()
	b.Meta = events.NewMeta("other", "corr", time.Unix(99, 0))
	b.ReadAt = time.Unix(50, 0)
	if !sameObservation(a, b) {
		t.Fatal("Meta and ReadAt must be ignored")
	}
	for name, mod := range map[string]func(o *events.Observed){
		"status":  func(o *events.Observed) { o.Status = "stopped" },
		"lock":    func(o *events.Observed) { o.Lock = "backup" },
		"node":    func(o *events.Observed) { o.Node = "pve2" },
		"digest":  func(o *events.Observed) { o.Digest = "e" },
		"tags":    func(o *events.Observed) { o.Config.Tags = []string{"a", "b"} },
		"cores":   func(o *events.Observed) { o.Config.Cores = 2 },
		"desc":    func(o *events.Observed) { o.Config.Description = "x" },
		"pending": func(o *events.Observed) { o.Pending = nil },
		"exists":  func(o *events.Observed) { o.Exists = false },
	} {
		b := base()
		mod(b)
		if sameObservation(a, b) {
			t.Errorf("a change of %s must be seen", name)
		}
	}
	if sameObservation(a, nil) || !sameObservation(nil, nil) {
		t.Fatal("nil handling")
	}
	g1 := &events.Observed{VMID: 100, Cluster: "pve", Source: events.SourceObserver}
	g2 := &events.Observed{VMID: 100, Cluster: "pve", Source: events.SourceObserver, Config: events.GuestConfig{Tags: []string{}}}
	if !sameObservation(g1, g2) {
		t.Fatal("two gone observations of a guest are the same")
	}
}

func TestDefaultConfigValidates(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Cluster != events.DefaultCluster || c.Interval != DefaultInterval || c.ConfigRefresh != DefaultConfigRefresh ||
		c.ReadConcurrency != DefaultReadConcurrency || c.MaxInFlight != DefaultMaxInFlight || c.Clock == nil || c.Name == "" {
		t.Fatalf("defaults %+v", c)
	}
	off := DefaultConfig()
	off.ConfigRefresh, off.VerifyOff = 0, true
	if err := off.Validate(); err != nil {
		t.Fatalf("verification off: %v", err)
	}
}

// A literal built without the defaults is refused, naming the field,
// rather than read as the defaults; so are values that mean nothing.
func TestZeroConfigRefused(t *testing.T) {
	if err := (Config{}).Validate(); err == nil || !strings.HasPrefix(err.Error(), "observer.Config.Cluster: ") {
		t.Fatalf("Config{}: %v, want an error naming observer.Config.Cluster", err)
	}
	for _, c := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Cluster = "a.b" }, "observer.Config.Cluster: "},
		{func(c *Config) { c.Interval = 0 }, "observer.Config.Interval: must be > 0, got 0s"},
		{func(c *Config) { c.ConfigRefresh = 0 }, "observer.Config.ConfigRefresh: must be > 0 (or verification off), got 0s"},
		{func(c *Config) { c.ConfigRefresh = -1 }, "observer.Config.ConfigRefresh: "},
		{func(c *Config) { c.VerifyRate = 0 }, "observer.Config.VerifyRate: "},
		{func(c *Config) { c.ReadConcurrency = -1 }, "observer.Config.ReadConcurrency: "},
		{func(c *Config) { c.MaxInFlight = 5000 }, "observer.Config.MaxInFlight: "},
		{func(c *Config) { c.AckTimeout = -1 }, "observer.Config.AckTimeout: "},
	} {
		cfg := DefaultConfig()
		c.mod(&cfg)
		if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%v, want %q…", err, c.want)
		}
	}
}
