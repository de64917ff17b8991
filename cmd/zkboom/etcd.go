package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdTarget runs the raw etcd operations closest to each ZooKeeper one, with one etcd client
// (one gRPC connection) per --conns and --clients requests in flight on each: the ceiling zetcd
// is measured against.
type etcdTarget struct {
	cfg     *config
	clients []*clientv3.Client
	writers []*clientv3.Client // watch: the client writing for the clients of clients[i]
	prefix  string
	value   string
	keys    []string
	deletes []string
	delNext atomic.Int64
}

func newEtcdTarget(ctx context.Context, cfg *config) (*etcdTarget, error) {
	value := make([]byte, cfg.valSize)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	t := &etcdTarget{cfg: cfg, value: string(value), prefix: fmt.Sprintf("/zkboom-%x/", time.Now().UnixNano())}
	n := cfg.conns
	if cfg.op == "watch" && n == 1 {
		n = 2 // a second client writes
	}
	for range n {
		c, err := clientv3.New(clientv3.Config{Endpoints: cfg.endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.close()
			return nil, fmt.Errorf("connect etcd %v: %w", cfg.endpoints, err)
		}
		t.clients = append(t.clients, c)
	}
	// The first request fails fast if no etcd answers.
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := t.clients[0].Get(pingCtx, t.prefix)
	cancel()
	if err != nil {
		t.close()
		return nil, fmt.Errorf("etcd %v: %w", cfg.endpoints, err)
	}
	if cfg.op == "watch" {
		t.writers = make([]*clientv3.Client, cfg.conns)
		for i := range t.writers {
			t.writers[i] = t.clients[(i+1)%len(t.clients)]
		}
		t.clients = t.clients[:cfg.conns]
	}
	if err := t.setup(ctx); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

func (t *etcdTarget) setup(ctx context.Context) error {
	c := t.clients[0]
	put := func(k string) error {
		if _, err := c.Put(ctx, k, t.value); err != nil {
			return fmt.Errorf("setup: put %s: %w", k, err)
		}
		return nil
	}
	var err error
	t.keys, t.deletes, err = seed(t.cfg, t.prefix, put)
	return err
}

func (t *etcdTarget) describe() string { return "etcd (raw)" }
func (t *etcdTarget) rootPath() string { return t.prefix }

func (t *etcdTarget) close() {
	for _, c := range t.clients {
		c.Close()
	}
	for _, w := range t.writers {
		if w != nil && !containsClient(t.clients, w) {
			w.Close()
		}
	}
}

func containsClient(cs []*clientv3.Client, c *clientv3.Client) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

var errKeyExists = errors.New("KeyExists")

func (t *etcdTarget) client(conn, id int) (request, error) {
	c := t.clients[conn]
	rng := newRand(id)
	seq := 0
	key := func() string { return t.keys[rng.IntN(len(t.keys))] }
	list := t.prefix + "list/"
	ops := map[string]func(ctx context.Context) error{
		// ZooKeeper's create fails if the node exists: a guarded put.
		"create": func(ctx context.Context) error {
			seq++
			k := t.prefix + "n/" + keyName(fmt.Sprintf("%x-", id), seq, t.cfg.keySize)
			r, err := c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).Then(clientv3.OpPut(k, t.value)).Commit()
			if err == nil && !r.Succeeded {
				err = errKeyExists
			}
			return err
		},
		"set": func(ctx context.Context) error {
			_, err := c.Put(ctx, key(), t.value)
			return err
		},
		"get": func(ctx context.Context) error {
			_, err := c.Get(ctx, key())
			return err
		},
		"exists": func(ctx context.Context) error {
			_, err := c.Get(ctx, key(), clientv3.WithCountOnly())
			return err
		},
		"children": func(ctx context.Context) error {
			_, err := c.Get(ctx, list, clientv3.WithPrefix(), clientv3.WithKeysOnly())
			return err
		},
		"delete": func(ctx context.Context) error {
			i := t.delNext.Add(1) - 1
			if int(i) >= len(t.deletes) {
				return errors.New("no key left to delete")
			}
			_, err := c.Delete(ctx, t.deletes[i])
			return err
		},
	}
	switch t.cfg.op {
	case "watch":
		return t.watchClient(conn, id)
	case "mixed":
		total := t.cfg.mix[len(t.cfg.mix)-1].cum
		return func(ctx context.Context) (time.Duration, error) {
			f := ops[pickMix(t.cfg.mix, rng.IntN(total))]
			return timed(func() error { return f(ctx) })
		}, nil
	}
	f := ops[t.cfg.op]
	return func(ctx context.Context) (time.Duration, error) { return timed(func() error { return f(ctx) }) }, nil
}

// watchClient measures from just before a put on the writer client to the arrival of the event
// on the client's own watch of the key, stamped as zkTarget.watchClient stamps it.
func (t *etcdTarget) watchClient(conn, id int) (request, error) {
	c, w := t.clients[conn], t.writers[conn]
	k := t.prefix + "w/" + keyName("w", id, t.cfg.keySize)
	wch := c.Watch(clientv3.WithRequireLeader(context.Background()), k, clientv3.WithCreatedNotify())
	select {
	case resp := <-wch:
		if err := resp.Err(); err != nil || !resp.Created {
			return nil, fmt.Errorf("setup: watch %s: %v", k, err)
		}
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("setup: watch %s: not created after 30s", k)
	}
	return func(ctx context.Context) (time.Duration, error) {
		arrived := make(chan arrival, 1)
		go func() {
			select {
			case resp, ok := <-wch:
				var err error
				if !ok {
					err = errors.New("watch channel closed")
				} else {
					err = resp.Err()
				}
				arrived <- arrival{time.Now(), err}
			case <-time.After(30 * time.Second):
				arrived <- arrival{err: errWatchTimeout}
			}
		}()
		t0 := time.Now()
		_, err := w.Put(ctx, k, t.value)
		a := <-arrived // after a failed put too, so that no stray reader takes the next event
		if err != nil {
			return 0, err
		}
		if a.err != nil {
			return 0, a.err
		}
		return a.at.Sub(t0), nil
	}, nil
}

func (t *etcdTarget) errorName(err error) string {
	switch {
	case errors.Is(err, errKeyExists):
		return "KeyExists"
	case errors.Is(err, errWatchTimeout):
		return "WatchTimeout"
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	}
	return rpctypes.ErrorDesc(err)
}
