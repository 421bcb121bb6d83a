package bootstrap

import (
	"context"
	"fmt"
	"math"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdStore is a Store on an etcd cluster.
type etcdStore struct {
	cli       *clientv3.Client
	endpoints []string
}

// NewEtcdStore connects to the etcd cluster cfg names. It waits for a
// connection only to authenticate, no longer than ctx allows; an
// unreachable cluster otherwise shows in the first request.
func NewEtcdStore(ctx context.Context, cfg ClientConfig) (Store, error) {
	cli, err := cfg.newClient(ctx)
	if err != nil {
		return nil, err
	}
	return &etcdStore{cli: cli, endpoints: cfg.Endpoints}, nil
}

func (s *etcdStore) Describe() string { return fmt.Sprintf("etcd at %v", s.endpoints) }

func (s *etcdStore) Close() error { return s.cli.Close() }

// Grant rounds ttl up to whole seconds, etcd's unit, and to at least one.
func (s *etcdStore) Grant(ctx context.Context, ttl time.Duration) (LeaseID, time.Duration, error) {
	secs := max(int64(math.Ceil(ttl.Seconds())), 1)
	resp, err := s.cli.Grant(ctx, secs)
	if err != nil {
		return NoLease, 0, err
	}
	return LeaseID(resp.ID), time.Duration(resp.TTL) * time.Second, nil
}

func (s *etcdStore) KeepAlive(ctx context.Context, lease LeaseID) (<-chan struct{}, error) {
	ch, err := s.cli.KeepAlive(ctx, clientv3.LeaseID(lease))
	if err != nil {
		return nil, err
	}
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		for range ch {
			select {
			case out <- struct{}{}:
			default: // the reader has not taken the last one: it counts the same
			}
		}
	}()
	return out, nil
}

func (s *etcdStore) Revoke(ctx context.Context, lease LeaseID) error {
	_, err := s.cli.Revoke(ctx, clientv3.LeaseID(lease))
	return err
}

func leaseOpts(lease LeaseID) []clientv3.OpOption {
	if lease == NoLease {
		return nil
	}
	return []clientv3.OpOption{clientv3.WithLease(clientv3.LeaseID(lease))}
}

func (s *etcdStore) Put(ctx context.Context, key string, value []byte, lease LeaseID) error {
	_, err := s.cli.Put(ctx, key, string(value), leaseOpts(lease)...)
	return err
}

func (s *etcdStore) Create(ctx context.Context, key string, value []byte, lease LeaseID) (bool, []byte, error) {
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value), leaseOpts(lease)...)).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return false, nil, err
	}
	if resp.Succeeded {
		return true, nil, nil
	}
	var existing []byte
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		existing = kvs[0].Value
	}
	return false, existing, nil
}

func (s *etcdStore) Delete(ctx context.Context, key string, prefix bool) error {
	var opts []clientv3.OpOption
	if prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	_, err := s.cli.Delete(ctx, key, opts...)
	return err
}

func (s *etcdStore) List(ctx context.Context, prefix string) ([]KeyValue, int64, error) {
	resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, err
	}
	kvs := make([]KeyValue, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		kvs[i] = KeyValue{Key: string(kv.Key), Value: kv.Value, Revision: kv.ModRevision}
	}
	return kvs, resp.Header.Revision, nil
}

// Watch requires a leader, so that a member cut off from the cluster ends
// the watch instead of holding it silent.
func (s *etcdStore) Watch(ctx context.Context, prefix string, rev int64) <-chan WatchResponse {
	out := make(chan WatchResponse)
	go func() {
		defer close(out)
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		defer cancel()
		for resp := range s.cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev)) {
			var wr WatchResponse
			switch {
			case resp.CompactRevision != 0:
				wr.Compacted = true
			case resp.Err() != nil:
				wr.Err = resp.Err()
			default:
				wr.Events = make([]Event, len(resp.Events))
				for i, ev := range resp.Events {
					wr.Events[i] = Event{
						Deleted: ev.Type == clientv3.EventTypeDelete,
						KV:      KeyValue{Key: string(ev.Kv.Key), Value: ev.Kv.Value, Revision: ev.Kv.ModRevision},
					}
				}
			}
			select {
			case out <- wr:
			case <-ctx.Done():
				return
			}
			if wr.Compacted || wr.Err != nil {
				return
			}
		}
	}()
	return out
}
