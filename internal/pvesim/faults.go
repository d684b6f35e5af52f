package pvesim

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"
)

// Duration is a time.Duration that reads and writes as "250ms" in JSON.
type Duration time.Duration

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Faults are the injectable misbehaviours. Every field can be changed while
// the simulator runs; the zero value is a perfectly healthy Proxmox.
type Faults struct {
	// Latency is added to every /api2/json call before it is handled.
	Latency Duration `json:"latency"`
	// TaskLatency is how long every task runs before it takes effect. Zero
	// completes tasks before their UPID is returned.
	TaskLatency Duration `json:"task_latency"`
	// TaskLatencyByType overrides TaskLatency for the task types it names
	// (Proxmox's: qmstart, qmstop, qmshutdown, qmconfig, vzstart, …; see
	// [TaskTypes]), zero included: {"qmstart": "1s", "qmconfig": "200ms"}
	// runs power-on tasks for a second and config tasks for 0.2 s. A QEMU
	// config write through the synchronous PUT runs the qmconfig worker
	// inside the call, as qemu-server does, and so answers after
	// TaskLatencyFor("qmconfig").
	TaskLatencyByType map[string]Duration `json:"task_latency_by_type,omitempty"`
	// FailRate is the probability (0..1) that a mutating call fails with a
	// transient Proxmox error: a failed task for asynchronous calls, a 500 for
	// synchronous ones. The error is the flock timeout real clusters produce
	// under contention.
	FailRate float64 `json:"fail_rate"`
	// FailMessage replaces the flock timeout as the injected failure's
	// text, e.g. "start failed: QEMU exited with code 1": a failure a
	// client must report rather than wait out as a lock.
	FailMessage string `json:"fail_message,omitempty"`
	// WarnRate is the probability (0..1) that a successful task ends with
	// "TASK WARNINGS: 1" instead of "TASK OK".
	WarnRate float64 `json:"warn_rate"`
	// ResourcesLag is pvestatd's cycle (10s on Proxmox): each node
	// broadcasts its guests' name, status, maxcpu and maxmem that often,
	// on its own phase, and /cluster/resources shows the last broadcast;
	// lock, tags, node and pool stay live, as on Proxmox (pvestatd.go).
	// 0: no lag.
	ResourcesLag Duration `json:"resources_lag"`
	// UnreachableUntil: until then every /api2/json connection is closed
	// without a response, as when Proxmox is down or the network is cut.
	UnreachableUntil time.Time `json:"unreachable_until"`
	// AuthFailDelay delays 401 answers, as pveproxy does (3s on real hosts).
	AuthFailDelay Duration `json:"auth_fail_delay"`
	// StorageCloneLimit (0: off) is how many full clones onto one target
	// storage may run at once: a full clone started while that many run
	// fails, as a real one does whose disk allocation waited too long for
	// the storage's lock, with "clone failed: cfs-lock 'storage-<id>'
	// error: got lock request timeout" (shared storage) or "clone failed:
	// can't lock file '/var/lock/pve-manager/pve-storage-<id>' - got
	// timeout" (local storage), and leaves nothing behind. Linked clones
	// are not counted nor refused.
	StorageCloneLimit int `json:"storage_clone_limit"`
	// StorageLockHold is how long each volume operation (vdisk_alloc,
	// vdisk_clone, vdisk_create_base, vdisk_free) of a clone, create,
	// config write, template conversion, disk move, destroy or volume
	// deletion holds its storage's lock (storagelock.go; 0, the default:
	// not modelled). Operations on one storage (one node's for a local
	// storage, the cluster's for a shared one) then queue for it.
	StorageLockHold Duration `json:"storage_lock_hold"`
	// StorageLockTimeout is how long an operation waits for a storage's
	// lock before it fails with pve-storage's timeout (0: Proxmox's 10s).
	StorageLockTimeout Duration `json:"storage_lock_timeout"`
}

func (f Faults) validate() error {
	switch {
	case f.Latency < 0, f.TaskLatency < 0, f.ResourcesLag < 0, f.AuthFailDelay < 0, f.StorageLockHold < 0, f.StorageLockTimeout < 0:
		return fmt.Errorf("pvesim: fault durations must be >= 0")
	case f.FailRate < 0 || f.FailRate > 1:
		return fmt.Errorf("pvesim: Faults.FailRate must be within 0..1, got %v", f.FailRate)
	case f.WarnRate < 0 || f.WarnRate > 1:
		return fmt.Errorf("pvesim: Faults.WarnRate must be within 0..1, got %v", f.WarnRate)
	case f.StorageCloneLimit < 0:
		return fmt.Errorf("pvesim: Faults.StorageCloneLimit must be >= 0, got %d", f.StorageCloneLimit)
	}
	return f.validateByType()
}

// Faults returns the faults now in force (a copy the caller may change).
// It takes no lock: every request reads them, and must not queue behind a
// long one for it.
func (s *Sim) Faults() Faults { return s.faultsNow().clone() }

// faultsNow is the faults in force, to read only: its map is shared.
func (s *Sim) faultsNow() *Faults {
	if f := s.faultSnap.Load(); f != nil {
		return f
	}
	return &Faults{}
}

// publishFaults makes the faults readable without the lock, and runs
// pvestatd at the cycle in force (once New has seeded the guests). Caller
// holds mu.
func (s *Sim) publishFaults() {
	f := s.faults
	s.faultSnap.Store(&f)
	if s.handler != nil {
		s.syncPvestatd()
	}
}

// SetFaults replaces the faults in force.
func (s *Sim) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	s.faults = f.clone() // the caller keeps its map
	s.publishFaults()
	s.mu.Unlock()
	return nil
}

// UpdateFaults applies fn to the faults in force, atomically.
func (s *Sim) UpdateFaults(fn func(*Faults)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faults.clone() // readers hold the map in force
	fn(&f)
	if err := f.validate(); err != nil {
		return err
	}
	s.faults = f
	s.publishFaults()
	return nil
}

// SetUnreachable makes /api2/json unreachable for d (0 ends it now).
func (s *Sim) SetUnreachable(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d <= 0 {
		s.faults.UnreachableUntil = time.Time{}
	} else {
		s.faults.UnreachableUntil = time.Now().Add(d)
	}
	s.publishFaults()
}

func (s *Sim) unreachable() bool {
	f := s.faultsNow()
	return !f.UnreachableUntil.IsZero() && time.Now().Before(f.UnreachableUntil)
}

// LockGuest sets a Proxmox config lock ("backup", "snapshot", "migrate",
// "clone", ...) on a guest for d; 0 keeps it until [Sim.UnlockGuest]. Like a
// real vzdump, setting and clearing the lock each change the digest.
func (s *Sim) LockGuest(vmid int, lock string, d time.Duration) error {
	if !validLock(lock) {
		return fmt.Errorf("pvesim: unknown lock %q", lock)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.guests[vmid]
	if g == nil {
		return fmt.Errorf("pvesim: no guest %d", vmid)
	}
	g.conf["lock"] = lock
	g.touch()
	g.lockGen++
	gen := g.lockGen
	if d > 0 {
		time.AfterFunc(d, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if g2 := s.guests[vmid]; g2 == g && g.lockGen == gen && g.conf["lock"] == lock {
				delete(g.conf, "lock")
				g.touch()
			}
		})
	}
	return nil
}

// UnlockGuest clears a guest's lock.
func (s *Sim) UnlockGuest(vmid int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.guests[vmid]
	if g == nil {
		return fmt.Errorf("pvesim: no guest %d", vmid)
	}
	if _, ok := g.conf["lock"]; ok {
		delete(g.conf, "lock")
		g.lockGen++
		g.touch()
	}
	return nil
}

// SetIgnoreShutdown makes a guest ignore ACPI shutdown requests: a shutdown
// without forceStop, and a VM's reboot (never forced), then fail with
// Proxmox's timeout error; a container's reboot is killed after its
// timeout, as pve-container does.
func (s *Sim) SetIgnoreShutdown(vmid int, ignore bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ignore {
		s.noACPI[vmid] = true
	} else {
		delete(s.noACPI, vmid)
	}
}

func validLock(l string) bool {
	switch l {
	case "backup", "clone", "create", "migrate", "rollback", "snapshot", "snapshot-delete",
		"suspending", "suspended", "disk", "fstrim", "mounted", "destroyed":
		return true
	}
	return false
}

// roll reports whether an event of probability p happens. Caller holds mu.
func (s *Sim) roll(p float64) bool {
	return p > 0 && s.rng.Float64() < p
}

// controlRoutes serves /_sim: fault injection and inspection, no auth.
func (s *Sim) controlRoutes(mux *http.ServeMux) {
	s.releaseRoutes(mux)
	mux.HandleFunc("GET /_sim/faults", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, s.Faults())
	})
	// PUT/PATCH merge the given fields into the faults in force.
	merge := func(w http.ResponseWriter, r *http.Request) {
		var perr error
		// Field names in any case, as encoding/json matched them.
		err := s.UpdateFaults(func(f *Faults) { perr = json.UnmarshalRead(r.Body, f, readOpts, json.MatchCaseInsensitiveNames(true)) })
		if perr != nil {
			http.Error(w, "bad faults JSON: "+perr.Error(), http.StatusBadRequest)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, s.Faults())
	}
	mux.HandleFunc("PUT /_sim/faults", merge)
	mux.HandleFunc("PATCH /_sim/faults", merge)
	mux.HandleFunc("POST /_sim/unreachable", func(w http.ResponseWriter, r *http.Request) {
		d, err := durationParam(r, "for")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.SetUnreachable(d)
		writeJSON(w, s.Faults())
	})
	mux.HandleFunc("POST /_sim/lock", func(w http.ResponseWriter, r *http.Request) {
		vmid, err := strconv.Atoi(r.URL.Query().Get("vmid"))
		if err != nil {
			http.Error(w, "vmid: "+err.Error(), http.StatusBadRequest)
			return
		}
		d, err := durationParam(r, "for")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		lock := r.URL.Query().Get("lock")
		if lock == "" {
			lock = "backup"
		}
		if err := s.LockGuest(vmid, lock, d); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, map[string]any{"vmid": vmid, "lock": lock})
	})
	mux.HandleFunc("DELETE /_sim/lock", func(w http.ResponseWriter, r *http.Request) {
		vmid, err := strconv.Atoi(r.URL.Query().Get("vmid"))
		if err == nil {
			err = s.UnlockGuest(vmid)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, map[string]any{"vmid": vmid})
	})
	mux.HandleFunc("POST /_sim/pvestatd", func(w http.ResponseWriter, r *http.Request) {
		s.Pvestatd()
		writeJSON(w, s.Faults())
	})
	mux.HandleFunc("GET /_sim/guests", func(w http.ResponseWriter, r *http.Request) {
		gs := s.Guests()
		sort.Slice(gs, func(i, j int) bool { return gs[i].VMID < gs[j].VMID })
		writeJSON(w, gs)
	})
	mux.HandleFunc("GET /_sim/stats", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"calls": s.Calls(), "mutations": s.Mutations(), "tasks": len(s.Tasks()),
			"api_workers": s.APIWorkerStats()})
	})
}

func durationParam(r *http.Request, name string) (time.Duration, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return d, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	b, err := encodeData(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = w.Write(append(b, '\n'))
}
