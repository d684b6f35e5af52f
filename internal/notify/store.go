package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go/jetstream"
)

// Bucket is the notifier's own key-value bucket (one revision per key):
//
//	g.<route>.<cluster>.<vmid>  what a route recorded of a guest (guestRecord)
//	poll.<cluster>              the poller's last leases and conditions (pollRecord)
//	ev.<cluster>.<hash>         a notice the poller found (lost executor or
//	                            partition, role not ready), created once
//	parked.<route>.<hash>       a notice a route gave up on (parkedRecord)
//	owner.<cluster>             the notifier running for the cluster (ownerRecord)
const Bucket = "converge_notify"

// Consumer is a route's durable consumer's name, on the views stream and
// on the notifier's bucket's stream alike: notify_<cluster>~<route>. The
// cluster is in it, so that two clusters' notifiers on one NATS with
// routes of the same name do not share (and rewrite) one consumer; "~"
// is in neither a cluster id nor a route name, so no two pairs give one
// name, and it is valid in a NATS consumer name (at most 7+64+1+32
// characters).
func Consumer(cluster, route string) string { return "notify_" + cluster + "~" + route }

// ParkedFilter is the keys of a route's parked notices.
func ParkedFilter(route string) string { return "parked." + route + ".>" }

func guestKey(route, cluster string, vmid int) string {
	return "g." + route + "." + cluster + "." + strconv.Itoa(vmid)
}

func pollKey(cluster string) string { return "poll." + cluster }

// eventsFilter is the subject of a cluster's poller notices in the
// bucket's stream.
func eventsFilter(cluster string) string { return "$KV." + Bucket + ".ev." + cluster + ".>" }

func hashKey(k string) string {
	h := sha256.Sum256([]byte(k))
	return hex.EncodeToString(h[:12])
}

func eventKey(cluster, key string) string { return "ev." + cluster + "." + hashKey(key) }

func parkedKey(route, key string) string { return "parked." + route + "." + hashKey(key) }

// parkedRecord is a notice a route parked, with why.
type parkedRecord struct {
	Notice   Notice    `json:"notice"`
	Reason   string    `json:"reason"`
	ParkedAt time.Time `json:"parked_at"`
}

// openBucket binds the notifier's bucket, creating it if it is missing
// (the notify user may create this one bucket and no other).
func openBucket(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: Bucket, Description: "converge notifier: routes' positions in guests' states, lost members, parked notices",
			History: 1, Replicas: max(replicas, 1), Storage: jetstream.FileStorage})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, Bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("notify bucket %s: %w", Bucket, err)
	}
	return kv, nil
}

// getJSON reads a key into v; ok is false when it has no value.
func getJSON(ctx context.Context, kv jetstream.KeyValue, key string, v any) (ok bool, err error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, json.Unmarshal(e.Value(), v)
}

func putJSON(ctx context.Context, kv jetstream.KeyValue, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = kv.Put(ctx, key, b)
	return err
}
