package bench

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/executor"
)

// FailoverOptions size a failover run ([RunFailover], `converge bench
// --profile failover`). Start from [DefaultFailoverOptions].
type FailoverOptions struct {
	// ExecutorCommand runs one executor process: the converge binary and
	// "executor" (the bench adds --nats, --pve-*, --name, --lease-ttl and
	// --ack-wait). Required: executors are killed with SIGKILL, so they
	// must be processes of their own.
	ExecutorCommand []string
	// Executors run at once; one of them is killed at a time.
	Executors int
	// Kills is how many SIGKILLs the run measures.
	Kills int
	// Guests and Nodes of the simulator (in the bench's process).
	Guests, Nodes int
	// Rate is the load: desired changes a second, each a new description
	// (a config write) and the other power state (a start or a shutdown),
	// round-robin over the guests.
	Rate float64
	// PowerTask and ConfigTask are how long the simulator's power tasks
	// and config writes run: the actions in flight at a kill.
	PowerTask, ConfigTask time.Duration
	// APILatency is added to every simulator call.
	APILatency time.Duration
	// LeaseTTL and AckWait are the executors' (--lease-ttl, --ack-wait);
	// the in-process planner gets the same lease TTL, as `converge up`
	// gives it.
	LeaseTTL, AckWait time.Duration
	// Settle is how long the run waits, after the executors share the
	// partitions again, before the next kill: the restarted executor's
	// actions get under way.
	Settle time.Duration
	// Pauses, after the kills, stop one executor at a time (SIGSTOP) for
	// PauseFor and let it go on (SIGCONT), as a long GC pause or a frozen
	// VM would: what a shorter LeaseTTL or AckWait costs shows as leases
	// lost and spurious redeliveries. 0: none.
	Pauses   int
	PauseFor time.Duration
	// Dir holds the journal and the executors' logs; default a temp dir
	// removed afterwards.
	Dir      string
	Progress func(phase string, done, total int)
	Logger   zerolog.Logger
}

// Failover defaults, each with its reason.
const (
	// DefaultFailoverExecutors: three, so that a kill leaves two
	// survivors to share the dead one's partitions.
	DefaultFailoverExecutors = 3
	// DefaultFailoverKills: the p99 of 20 kills (the p99 of 20 is
	// their maximum).
	DefaultFailoverKills = 20
	// DefaultFailoverGuests over DefaultFailoverNodes: every partition
	// gets actions about once a second at DefaultFailoverRate, and a
	// guest is changed again only after its previous change is done.
	DefaultFailoverGuests = 300
	DefaultFailoverNodes  = 3
	// DefaultFailoverRate keeps within converge's shipped node limits (4
	// tasks in flight, 10 mutating calls a second per node): 8 changes
	// of two actions each over 3 nodes.
	DefaultFailoverRate = 8
	// DefaultFailoverPowerTask and DefaultFailoverConfigTask are the
	// Proxmox profile's: a second per power task, 0.2 s per config write.
	DefaultFailoverPowerTask  = DefaultPowerTask
	DefaultFailoverConfigTask = DefaultConfigTask
	// DefaultFailoverSettle: a few of the restarted executor's actions.
	DefaultFailoverSettle = 2 * time.Second
)

// DefaultFailoverOptions returns the defaults above, with the executors'
// shipped lease TTL and ack wait.
func DefaultFailoverOptions() FailoverOptions {
	return FailoverOptions{Executors: DefaultFailoverExecutors, Kills: DefaultFailoverKills,
		Guests: DefaultFailoverGuests, Nodes: DefaultFailoverNodes, Rate: DefaultFailoverRate,
		PowerTask: DefaultFailoverPowerTask, ConfigTask: DefaultFailoverConfigTask,
		LeaseTTL: executor.DefaultLeaseTTL, AckWait: executor.DefaultAckWait, Settle: DefaultFailoverSettle}
}

// Validate refuses FailoverOptions that make no sense, naming the field.
func (o FailoverOptions) Validate() error {
	const f = "bench.FailoverOptions."
	switch {
	case len(o.ExecutorCommand) == 0:
		return fmt.Errorf(f + "ExecutorCommand: must name the converge binary and \"executor\"")
	case o.Executors < 2 || o.Executors > 16:
		return fmt.Errorf(f+"Executors: must be within 2..16 (a survivor takes over), got %d", o.Executors)
	case o.Kills < 1:
		return fmt.Errorf(f+"Kills: must be >= 1, got %d", o.Kills)
	case o.Nodes < 1 || o.Nodes > 100:
		return fmt.Errorf(f+"Nodes: must be within 1..100, got %d", o.Nodes)
	case o.Guests < o.Nodes || o.Guests > 100000:
		return fmt.Errorf(f+"Guests: must be within nodes (%d)..100000, got %d", o.Nodes, o.Guests)
	case !(o.Rate > 0):
		return fmt.Errorf(f+"Rate: must be > 0 changes a second, got %v", o.Rate)
	case o.PowerTask < 0 || o.ConfigTask < 0 || o.APILatency < 0:
		return fmt.Errorf(f+"PowerTask, ConfigTask, APILatency: must be >= 0, got %s, %s, %s", o.PowerTask, o.ConfigTask, o.APILatency)
	case o.LeaseTTL <= 0 || o.AckWait <= 0:
		return fmt.Errorf(f+"LeaseTTL, AckWait: must be > 0, got %s, %s", o.LeaseTTL, o.AckWait)
	case o.Pauses < 0 || (o.Pauses > 0 && o.PauseFor <= 0):
		return fmt.Errorf(f+"Pauses, PauseFor: want pauses >= 0, each > 0 long, got %d of %s", o.Pauses, o.PauseFor)
	case o.Settle < 0:
		return fmt.Errorf(f+"Settle: must be >= 0, got %s", o.Settle)
	}
	return nil
}

// FailoverReport is the run's result (-o json).
type FailoverReport struct {
	// KillToActS: per kill, from the SIGKILL until a survivor holds every
	// partition the killed executor held and has journalled a result for
	// every action it left unfinished (the later of Takeover and Resume).
	KillToActSP50 float64 `json:"kill_to_act_s_p50"`
	KillToActSP90 float64 `json:"kill_to_act_s_p90"`
	KillToActSP99 float64 `json:"kill_to_act_s_p99"`
	KillToActSMax float64 `json:"kill_to_act_s_max"`
	// TakeoverS*: until a survivor held the lease of every partition it
	// held (the lease bucket polled every 20 ms: when its consumer can
	// take actions again).
	TakeoverSP50 float64 `json:"takeover_s_p50"`
	TakeoverSP99 float64 `json:"takeover_s_p99"`
	// ResumeS*: until every action it left unfinished had a survivor's
	// result (its in-flight ones come back after AckWait).
	ResumeSP50 float64 `json:"resume_s_p50"`
	ResumeSP99 float64 `json:"resume_s_p99"`
	Kills      int     `json:"kills"`
	// InFlightAtKill: actions with a "started" result of the killed
	// executor and no final one, summed over the kills.
	InFlightAtKill int `json:"in_flight_at_kill"`
	// DuplicateTasks: mutating calls the simulator received and carried
	// out more than once, the same method and path, for one action
	// (target 0).
	DuplicateTasks int `json:"duplicate_tasks"`
	// RefusedRepeats: calls repeated for one action that the simulator
	// refused (a config write with a stale digest): no effect.
	RefusedRepeats int `json:"refused_repeats"`
	// Handoffs: actions with results of two executors; SpuriousRedeliveries
	// are those whose earlier executor was not killed.
	Handoffs             int `json:"handoffs"`
	SpuriousRedeliveries int `json:"spurious_redeliveries"`
	// Pauses and PausesLostLeases: executors stopped for PauseS, and how
	// many of them lost a lease meanwhile.
	Pauses           int     `json:"pauses"`
	PauseS           float64 `json:"pause_s"`
	PausesLostLeases int     `json:"pauses_lost_leases"`
	Actions          int     `json:"actions"`
	Mutations        int     `json:"mutations"`
	// UnattributedMutations came before any action of their guest.
	UnattributedMutations int `json:"unattributed_mutations"`
	// Settings of the run.
	LeaseTTLS   float64 `json:"lease_ttl_s"`
	AckWaitS    float64 `json:"ack_wait_s"`
	Executors   int     `json:"executors"`
	Guests      int     `json:"guests"`
	Nodes       int     `json:"nodes"`
	Partitions  int     `json:"partitions"`
	Rate        float64 `json:"rate"`
	PowerTaskS  float64 `json:"power_task_s"`
	ConfigTaskS float64 `json:"config_task_s"`
	// ExpectedS is the analytic bound max(LeaseTTL + LeaseTTL/5, AckWait)
	// (executor.Config.LeaseTTL).
	ExpectedS float64 `json:"expected_s"`
}

// KillTimes are one kill's figures.
type KillTimes struct {
	Executor            string
	Held, Open, Started int
	Takeover, Resume    time.Duration
}

// Act is the kill's kill-to-act time.
func (k KillTimes) Act() time.Duration { return max(k.Takeover, k.Resume) }

// FailoverDetails are what the table prints besides the report.
type FailoverDetails struct {
	PerKill []KillTimes
	Elapsed time.Duration
}
