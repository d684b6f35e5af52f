package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
)

// phaseProfile profiles one timed phase of a run into
// Options.PhaseProfiles: its CPU (<name>.cpu.pprof) and the allocation
// profile before and after it (<name>.allocs-before.pprof and
// <name>.allocs-after.pprof; `go tool pprof -base before after` is the
// phase's own), and its execution trace (<name>.trace; `go tool trace
// -pprof=sched` shows where goroutines waited for a CPU). A profile of the
// whole run mixes the phases: the raw bus, the burst and the replay would
// hide what an action costs.
type phaseProfile struct {
	dir, name string
	cpu, tr   *os.File
}

// startPhase starts profiling phase name; nil when no directory is set.
// The caller has collected the garbage before (settle), so that the
// "before" profile is current.
func (r *run) startPhase(name string) (*phaseProfile, error) {
	if r.o.PhaseProfiles == "" {
		return nil, nil
	}
	p := &phaseProfile{dir: r.o.PhaseProfiles, name: name}
	if err := p.writeAllocs("allocs-before"); err != nil {
		return nil, err
	}
	f, err := os.Create(p.path("cpu"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: profile of phase %s: %w", name, err)
	}
	p.cpu = f
	if p.tr, err = os.Create(filepath.Join(p.dir, name+".trace")); err == nil {
		if err = trace.Start(p.tr); err != nil {
			p.tr.Close()
		}
	}
	if err != nil {
		// Leave no profiler running for the next phase to trip on.
		pprof.StopCPUProfile()
		f.Close()
		return nil, fmt.Errorf("bench: trace of phase %s: %w", name, err)
	}
	return p, nil
}

// stop ends the phase's CPU profile and writes its "after" allocation
// profile, once the phase's figures are taken: the collections it runs to
// make the profile current cost nothing measured.
func (p *phaseProfile) stop() error {
	if p == nil {
		return nil
	}
	trace.Stop()
	pprof.StopCPUProfile()
	if err := errors.Join(p.tr.Close(), p.cpu.Close()); err != nil {
		return err
	}
	// The allocation profile is as of the last completed collection: two
	// make it cover the whole phase.
	runtime.GC()
	runtime.GC()
	return p.writeAllocs("allocs-after")
}

func (p *phaseProfile) path(kind string) string {
	return filepath.Join(p.dir, p.name+"."+kind+".pprof")
}

func (p *phaseProfile) writeAllocs(kind string) error {
	f, err := os.Create(p.path(kind))
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
