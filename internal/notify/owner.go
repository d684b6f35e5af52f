package notify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go/jetstream"
)

// ownerRecord is the key owner.<cluster> in the notifier's bucket: which
// notifier runs for the cluster, renewed each poll. Two notifiers for one
// cluster would split each route's consumers between them (each message
// to one of them) and interleave the poller's records.
type ownerRecord struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
}

func ownerKey(cluster string) string { return "owner." + cluster }

// ownerStale is how long without a renewal an owner is taken for gone (a
// killed notifier): a successor takes the key over then.
func (n *Notifier) ownerStale() time.Duration {
	return max(5*time.Duration(n.cfg.Poll), 10*time.Second)
}

// errOwned is another notifier running for the cluster.
var errOwned = errors.New("another notifier runs for this cluster")

// acquire takes the cluster's owner key: at once if it is free or stale;
// while another notifier holds it, it waits for it to go stale (a killed
// predecessor) and refuses once it sees the holder renew it (one that
// runs).
func (n *Notifier) acquire(ctx context.Context) error {
	key := ownerKey(n.cluster)
	var seen uint64
	for {
		b, err := json.Marshal(ownerRecord{ID: n.id, At: n.now().UTC()})
		if err != nil {
			return err
		}
		rev, err := n.kv.Create(ctx, key, b)
		if err == nil {
			n.ownerRev = rev
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("notify: owner key %s: %w", key, err)
		}
		e, err := n.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // released meanwhile
		}
		if err != nil {
			return fmt.Errorf("notify: owner key %s: %w", key, err)
		}
		var cur ownerRecord
		_ = json.Unmarshal(e.Value(), &cur)
		if n.now().Sub(cur.At) > n.ownerStale() {
			if rev, err := n.kv.Update(ctx, key, b, e.Revision()); err == nil {
				n.log.Warn().Str("previous", cur.ID).Time("renewed_at", cur.At).Msg("notify: took over from a notifier that stopped renewing (killed?)")
				n.ownerRev = rev
				return nil
			}
			continue
		}
		if seen != 0 && e.Revision() != seen {
			return fmt.Errorf("notify: %w (cluster %s, key %s in bucket %s, renewed at %s): run one notifier per cluster", errOwned, n.cluster, key, Bucket, cur.At.Format(time.RFC3339))
		}
		if seen == 0 {
			n.log.Warn().Str("holder", cur.ID).Msg("notify: another notifier holds this cluster; waiting to see whether it still runs")
			seen = e.Revision()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(n.cfg.Poll)):
		}
	}
}

// renew extends the owner key; an error means another notifier took it
// over (this one was taken for gone): it must stop.
func (n *Notifier) renew(ctx context.Context) error {
	b, err := json.Marshal(ownerRecord{ID: n.id, At: n.now().UTC()})
	if err != nil {
		return err
	}
	rev, err := n.kv.Update(ctx, ownerKey(n.cluster), b, n.ownerRev)
	if err != nil {
		return fmt.Errorf("notify: owner key %s not renewed (another notifier took it over?): %w", ownerKey(n.cluster), err)
	}
	n.ownerRev = rev
	return nil
}

// release frees the owner key on a graceful stop, so a successor starts
// at once.
func (n *Notifier) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = n.kv.Delete(ctx, ownerKey(n.cluster), jetstream.LastRevision(n.ownerRev))
}
