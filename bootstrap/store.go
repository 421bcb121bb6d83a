package bootstrap

import (
	"context"
	"time"
)

// Store is the key-value service the ranks of a job meet in. A job needs
// little of it: keys under leases that end when their owner stops renewing
// them, a create-if-absent, listings and one ordered watch of a prefix.
// [NewEtcdStore] reaches an etcd cluster, the default; [NewLocalStore] is
// a store inside this process, for running the ranks of a job as
// goroutines of one program, such as a test, with no server.
//
// Revisions order every change: each Put, Create and deleted key gets
// the next one, and a watch reports changes in that order. Implementations
// are safe for concurrent use.
type Store interface {
	// Grant creates a lease of about ttl and returns its id and the TTL
	// the store granted (which may be longer).
	Grant(ctx context.Context, ttl time.Duration) (LeaseID, time.Duration, error)
	// KeepAlive renews the lease until ctx ends. Its channel gets one
	// value per renewal and is closed when renewals stop: ctx ended, the
	// lease ended, or the store was unreachable for a whole TTL.
	KeepAlive(ctx context.Context, lease LeaseID) (<-chan struct{}, error)
	// Revoke ends the lease now, deleting the keys put under it.
	Revoke(ctx context.Context, lease LeaseID) error

	// Put sets key to value, under lease unless lease is NoLease.
	Put(ctx context.Context, key string, value []byte, lease LeaseID) error
	// Create sets key to value only if key is absent, and reports whether
	// it did; if not, it returns the value key holds.
	Create(ctx context.Context, key string, value []byte, lease LeaseID) (created bool, existing []byte, err error)
	// Delete removes key, or every key that starts with key if prefix.
	Delete(ctx context.Context, key string, prefix bool) error
	// List returns every key that starts with prefix, in key order, and
	// the revision of the store at the time of the listing.
	List(ctx context.Context, prefix string) ([]KeyValue, int64, error)
	// Watch reports, in revision order, every change under prefix from
	// revision rev on, until ctx ends or the store ends the watch (then
	// the channel is closed; a watch that can no longer go on says why in
	// a last response).
	Watch(ctx context.Context, prefix string, rev int64) <-chan WatchResponse

	// Describe names the store in messages, e.g. "etcd at [10.0.0.1:2379]".
	Describe() string
	// Close releases the connection to the store.
	Close() error
}

// LeaseID names a lease of a Store.
type LeaseID int64

// NoLease puts a key that lives until it is deleted.
const NoLease LeaseID = 0

// KeyValue is a key, its value and the revision that last changed it.
type KeyValue struct {
	Key      string
	Value    []byte
	Revision int64
}

// Event is one change of a watched key: a put or, if Deleted, a deletion
// (then KV.Value is empty).
type Event struct {
	Deleted bool
	KV      KeyValue
}

// WatchResponse is a batch of changes of a watch. Compacted says the
// store no longer has the history the watch needs (list again); Err that
// the watch failed.
type WatchResponse struct {
	Events    []Event
	Compacted bool
	Err       error
}
