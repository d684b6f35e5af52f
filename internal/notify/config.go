package notify

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"golang.org/x/net/http/httpguts"
	"sigs.k8s.io/yaml"
)

// Trigger names a kind of notification a route asks for.
type Trigger string

// The triggers (docs/notifications.md says where each comes from).
const (
	TriggerError         Trigger = "error"          // a guest entered error
	TriggerRejected      Trigger = "rejected"       // a guest's desired state was rejected
	TriggerHeld          Trigger = "held"           // the mass-change guard holds an action (awaits_approval guard)
	TriggerDestroyGated  Trigger = "destroy-gated"  // a destroy waits for approval (awaits_approval destroy)
	TriggerConverged     Trigger = "converged"      // a new desired revision was reached
	TriggerExecutorLost  Trigger = "executor-lost"  // an executor's membership expired
	TriggerPartitionLost Trigger = "partition-lost" // a partition's owner was lost with it
	TriggerRoleNotReady  Trigger = "role-not-ready" // observer silent, Proxmox unreachable, no planner
)

// Triggers are all triggers, the default of a route that names none.
var Triggers = []Trigger{TriggerError, TriggerRejected, TriggerHeld, TriggerDestroyGated, TriggerConverged,
	TriggerExecutorLost, TriggerPartitionLost, TriggerRoleNotReady}

// Formats of a route's body.
const (
	FormatJSON  = "json"  // the Notice as JSON
	FormatSlack = "slack" // {"text": …}, what Slack's and compatible incoming webhooks take
)

// Duration is a time.Duration written as "5s" in the file.
type Duration time.Duration

// UnmarshalJSON reads "1m30s". A number is refused: without a unit it
// would be nanoseconds (timeout: 30 is not 30 seconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration with its unit such as \"5s\", not %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Secret is a value given in the file, or read from the environment or a
// file when the configuration is loaded (a token in a header, a Slack
// URL, which is a credential itself). It is never logged.
type Secret struct {
	Value string `json:"value,omitempty"`
	Env   string `json:"env,omitempty"`
	File  string `json:"file,omitempty"`
}

func (s Secret) resolve() (string, error) {
	n := 0
	for _, v := range []string{s.Value, s.Env, s.File} {
		if v != "" {
			n++
		}
	}
	switch {
	case n != 1:
		return "", errors.New("give exactly one of value, env and file")
	case s.Env != "":
		v, ok := os.LookupEnv(s.Env)
		if !ok || v == "" {
			return "", fmt.Errorf("environment variable %s is not set", s.Env)
		}
		return v, nil
	case s.File != "":
		b, err := os.ReadFile(s.File)
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(string(b)), nil
	}
	return s.Value, nil
}

// Retry is a route's retries of a failed delivery, in process while the
// message is held (watermill's Retry middleware), before it is parked.
type Retry struct {
	Max         int      `json:"max"`
	Initial     Duration `json:"initial"`
	MaxInterval Duration `json:"max_interval"`
	Multiplier  float64  `json:"multiplier"`
}

// Throttle is at most Count deliveries per Per on a route.
type Throttle struct {
	Count int64    `json:"count"`
	Per   Duration `json:"per"`
}

// Route is one receiver and what it is sent.
type Route struct {
	Name string `json:"name"`
	// URL is the receiver's; URLSecret instead when the URL is a
	// credential (a Slack incoming webhook's is).
	URL       string            `json:"url,omitempty"`
	URLSecret *Secret           `json:"url_secret,omitempty"`
	Format    string            `json:"format,omitempty"`
	Triggers  []Trigger         `json:"triggers,omitempty"`
	Headers   map[string]Secret `json:"headers,omitempty"`
	Retry     Retry             `json:"retry"`
	Throttle  Throttle          `json:"throttle"`
	Timeout   Duration          `json:"timeout,omitempty"`

	// resolved at load: the URL and header values.
	url     string
	headers map[string]string
}

// Config is a notifier's file.
type Config struct {
	// Cluster is the Proxmox cluster watched ("": the process's --cluster).
	Cluster string `json:"cluster,omitempty"`
	// Poll is how often the leases bucket and the cluster document are
	// read for lost executors and roles not ready.
	Poll Duration `json:"poll,omitempty"`
	// ObserverSilent is how long without a heartbeat makes the observer
	// "not ready" (default: three of its intervals, as the planner judges).
	ObserverSilent Duration `json:"observer_silent,omitempty"`
	// ConditionGrace is how long a readiness condition must hold before
	// it is told (default 10s; negative: at once).
	ConditionGrace Duration `json:"condition_grace,omitempty"`
	Routes         []Route  `json:"routes"`
}

// Defaults of a route or the notifier left unset.
const (
	DefaultPoll           = 3 * time.Second
	DefaultConditionGrace = 10 * time.Second
	DefaultTimeout        = 10 * time.Second
	DefaultRetries        = 5
	DefaultInitial        = time.Second
	DefaultMaxInterval    = 30 * time.Second
)

var routeName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// Load reads and checks a notifier's file (YAML or JSON), resolving its
// secrets.
func Load(path string) (Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	c, err := Parse(raw)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse reads a notifier's configuration, fills defaults, checks it and
// resolves its secrets.
func Parse(raw []byte) (Config, error) {
	// Strict: a key given twice is refused, not the last one taken.
	js, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		return Config{}, fmt.Errorf("not YAML or JSON: %w", err)
	}
	var c Config
	if err := json.Unmarshal(js, &c, json.RejectUnknownMembers(true)); err != nil {
		return Config{}, err
	}
	return c, c.complete()
}

func (c *Config) complete() error {
	if c.Poll <= 0 {
		c.Poll = Duration(DefaultPoll)
	}
	switch {
	case c.ConditionGrace == 0:
		c.ConditionGrace = Duration(DefaultConditionGrace)
	case c.ConditionGrace < 0:
		c.ConditionGrace = 0
	}
	if len(c.Routes) == 0 {
		return errors.New("no routes")
	}
	seen := map[string]bool{}
	for i := range c.Routes {
		r := &c.Routes[i]
		if !routeName.MatchString(r.Name) {
			return fmt.Errorf("route %d: name %q: want 1-32 of a-z, 0-9, _ and -, starting with a letter or digit", i+1, r.Name)
		}
		if seen[r.Name] {
			return fmt.Errorf("route %s: named twice", r.Name)
		}
		seen[r.Name] = true
		if err := r.complete(); err != nil {
			return fmt.Errorf("route %s: %w", r.Name, err)
		}
	}
	return nil
}

func (r *Route) complete() error {
	switch {
	case r.URL != "" && r.URLSecret != nil:
		return errors.New("give url or url_secret, not both")
	case r.URLSecret != nil:
		v, err := r.URLSecret.resolve()
		if err != nil {
			return fmt.Errorf("url_secret: %w", err)
		}
		r.url = v
	default:
		r.url = r.URL
	}
	u, err := url.Parse(r.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("url: want an http:// or https:// URL") // the URL itself may be a secret: not quoted
	}
	if r.Format == "" {
		r.Format = FormatJSON
	}
	if r.Format != FormatJSON && r.Format != FormatSlack {
		return fmt.Errorf("format %q: want %s or %s", r.Format, FormatJSON, FormatSlack)
	}
	if len(r.Triggers) == 0 {
		r.Triggers = Triggers
	}
	for _, t := range r.Triggers {
		if !slices.Contains(Triggers, t) {
			return fmt.Errorf("trigger %q: want one of %v", t, Triggers)
		}
	}
	r.headers = map[string]string{}
	for k, s := range r.Headers {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("header %q: not a header name (an HTTP token)", k)
		}
		v, err := s.resolve()
		if err != nil {
			return fmt.Errorf("header %s: %w", k, err)
		}
		if !httpguts.ValidHeaderFieldValue(v) {
			return fmt.Errorf("header %s: its value has a character a header may not (not quoted: it may be a secret)", k)
		}
		r.headers[k] = v
	}
	if r.Timeout <= 0 {
		r.Timeout = Duration(DefaultTimeout)
	}
	if r.Retry.Max < 0 {
		return errors.New("retry.max: not negative")
	}
	if r.Retry.Max == 0 {
		r.Retry.Max = DefaultRetries
	}
	if r.Retry.Initial <= 0 {
		r.Retry.Initial = Duration(DefaultInitial)
	}
	if r.Retry.MaxInterval <= 0 {
		r.Retry.MaxInterval = Duration(DefaultMaxInterval)
	}
	if r.Retry.Multiplier < 1 {
		r.Retry.Multiplier = 2
	}
	if (r.Throttle.Count > 0) != (r.Throttle.Per > 0) {
		return errors.New("throttle: give count and per together")
	}
	// The wait for a delivery's turn is part of its attempt: it must
	// leave the delivery at least half the timeout.
	if r.Throttle.Count > 0 && 2*(time.Duration(r.Throttle.Per)/time.Duration(r.Throttle.Count)) > time.Duration(r.Timeout) {
		return errors.New("throttle: per/count must be at most half the timeout (the wait for a turn is part of an attempt)")
	}
	return nil
}

// wants reports whether the route asks for t.
func (r *Route) wants(t Trigger) bool { return slices.Contains(r.Triggers, t) }

// Names are the routes' names (the notifier's durable consumers, which
// its NATS user's permissions name).
func (c Config) Names() []string {
	var out []string
	for _, r := range c.Routes {
		out = append(out, r.Name)
	}
	return out
}
