package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/zksession"
)

// zkTarget drives zetcd or ZooKeeper through go-zookeeper: one session per connection, which
// go-zookeeper pipelines the requests of several goroutines on.
type zkTarget struct {
	cfg     *config
	conns   []*zk.Conn
	writers []*zk.Conn // watch: the session writing for the clients of conns[i]
	root    string     // everything this run creates is under it
	value   []byte
	keys    []string // the nodes set, get and exists pick from
	deletes []string // the nodes delete deletes
	delNext atomic.Int64
}

var openACL = zk.WorldACL(zk.PermAll)

// setupWidth is how many setup requests are in flight at once.
const setupWidth = 64

func newZKTarget(ctx context.Context, cfg *config) (*zkTarget, error) {
	t := &zkTarget{cfg: cfg, value: make([]byte, cfg.valSize), root: fmt.Sprintf("/zkboom-%x", time.Now().UnixNano())}
	for i := range t.value {
		t.value[i] = 'a' + byte(i%26)
	}
	t.conns = make([]*zk.Conn, cfg.conns)
	err := parallel(cfg.conns, 16, func(i int) error {
		c, err := dialZK(ctx, cfg.endpoints)
		t.conns[i] = c
		return err
	})
	if err != nil {
		t.close()
		return nil, err
	}
	if err := t.setup(ctx); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// dialZK opens a session and waits until it is established.
func dialZK(ctx context.Context, endpoints []string) (*zk.Conn, error) {
	c, events, err := zk.Connect(endpoints, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(silentLogger{}))
	if err != nil {
		return nil, err
	}
	if err := zksession.Await(ctx, events, 20*time.Second); err != nil {
		c.Close()
		if ctx.Err() != nil {
			return nil, err // an interrupted run is reported by ctx's own error
		}
		return nil, fmt.Errorf("connect %v: %w", endpoints, err)
	}
	return c, nil
}

type silentLogger struct{}

func (silentLogger) Printf(string, ...any) {}

func (t *zkTarget) setup(ctx context.Context) error {
	c := t.conns[0]
	for _, dir := range []string{t.root, t.root + "/k", t.root + "/n", t.root + "/list", t.root + "/d", t.root + "/w"} {
		if _, err := c.Create(dir, nil, 0, openACL); err != nil {
			return fmt.Errorf("setup: create %s: %w", dir, err)
		}
	}
	create := func(p string) error {
		if _, err := c.Create(p, t.value, 0, openACL); err != nil {
			return fmt.Errorf("setup: create %s: %w", p, err)
		}
		return nil
	}
	var err error
	if t.keys, t.deletes, err = seed(t.cfg, t.root+"/", create); err != nil {
		return err
	}
	if t.cfg.op == "watch" {
		// Each connection's writes come from another session: the next connection, or one
		// of its own when there is only one.
		t.writers = make([]*zk.Conn, len(t.conns))
		for i := range t.conns {
			t.writers[i] = t.conns[(i+1)%len(t.conns)]
		}
		if len(t.conns) == 1 {
			w, err := dialZK(ctx, t.cfg.endpoints)
			if err != nil {
				return err
			}
			t.writers[0] = w
		}
	}
	return nil
}

func (t *zkTarget) describe() string { return "ZooKeeper protocol" }
func (t *zkTarget) rootPath() string { return t.root }

func (t *zkTarget) close() {
	for _, c := range t.conns {
		if c != nil {
			c.Close()
		}
	}
	if len(t.conns) == 1 && len(t.writers) == 1 && t.writers[0] != t.conns[0] {
		t.writers[0].Close()
	}
}

func timed(f func() error) (time.Duration, error) {
	t0 := time.Now()
	err := f()
	return time.Since(t0), err
}

func (t *zkTarget) client(conn, id int) (request, error) {
	c := t.conns[conn]
	rng := newRand(id)
	seq := 0
	flags := int32(0)
	if t.cfg.sequential {
		flags |= zk.FlagSequence
	}
	if t.cfg.ephemeral {
		flags |= zk.FlagEphemeral
	}
	newNode := func() string {
		seq++
		return t.root + "/n/" + keyName(fmt.Sprintf("%x-", id), seq, t.cfg.keySize)
	}
	key := func() string { return t.keys[rng.IntN(len(t.keys))] }
	list := t.root + "/list"
	ops := map[string]func() error{
		"create": func() error {
			_, err := c.Create(newNode(), t.value, flags, openACL)
			return err
		},
		"set": func() error {
			_, err := c.Set(key(), t.value, -1)
			return err
		},
		"get": func() error {
			_, _, err := c.Get(key())
			return err
		},
		"exists": func() error {
			_, _, err := c.Exists(key())
			return err
		},
		"children": func() error {
			_, _, err := c.Children(list)
			return err
		},
		"delete": func() error {
			i := t.delNext.Add(1) - 1
			if int(i) >= len(t.deletes) {
				return errors.New("no node left to delete")
			}
			return c.Delete(t.deletes[i], -1)
		},
		"multi": func() error {
			p := newNode()
			res, err := c.Multi(&zk.CreateRequest{Path: p, Data: nil, Acl: openACL, Flags: flags &^ zk.FlagSequence},
				&zk.SetDataRequest{Path: p, Data: t.value, Version: 0})
			if err != nil {
				return err
			}
			for _, r := range res {
				if r.Error != nil {
					return r.Error
				}
			}
			return nil
		},
	}
	switch t.cfg.op {
	case "watch":
		return t.watchClient(conn, id)
	case "mixed":
		total := t.cfg.mix[len(t.cfg.mix)-1].cum
		return func(context.Context) (time.Duration, error) {
			return timed(ops[pickMix(t.cfg.mix, rng.IntN(total))])
		}, nil
	}
	f := ops[t.cfg.op]
	return func(context.Context) (time.Duration, error) { return timed(f) }, nil
}

// watchClient measures from just before a setData is sent on the writer's session to the
// arrival of the NodeDataChanged event on the client's own session. The event is stamped by a
// goroutine waiting for it while the setData is in flight: on another session the event can
// come before the setData's reply, and reading it only after the reply would measure the reply.
// Arming the watch (a getData) is not measured.
func (t *zkTarget) watchClient(conn, id int) (request, error) {
	c, w := t.conns[conn], t.writers[conn]
	p := t.root + "/w/" + keyName("w", id, t.cfg.keySize)
	if _, err := c.Create(p, t.value, 0, openACL); err != nil {
		return nil, fmt.Errorf("setup: create %s: %w", p, err)
	}
	return func(ctx context.Context) (time.Duration, error) {
		_, _, events, err := c.GetW(p)
		if err != nil {
			return 0, err
		}
		arrived := make(chan arrival, 1)
		go func() {
			select {
			case ev := <-events:
				err := ev.Err
				if err == nil && ev.Type != zk.EventNodeDataChanged {
					err = fmt.Errorf("event %v, want NodeDataChanged", ev.Type)
				}
				arrived <- arrival{time.Now(), err}
			case <-time.After(30 * time.Second):
				arrived <- arrival{err: errWatchTimeout}
			}
		}()
		t0 := time.Now()
		_, err = w.Set(p, t.value, -1)
		a := <-arrived // after a failed setData too: the watch is still armed until it times out
		if err != nil {
			return 0, err
		}
		if a.err != nil {
			return 0, a.err
		}
		return a.at.Sub(t0), nil
	}, nil
}

// arrival is when a watch event came, or why none did.
type arrival struct {
	at  time.Time
	err error
}

var errWatchTimeout = errors.New("WatchTimeout")

// zkErrors are go-zookeeper's errors with ZooKeeper's names for them.
var zkErrors = []struct {
	err  error
	name string
}{
	{zk.ErrNoNode, "NoNode"}, {zk.ErrNodeExists, "NodeExists"}, {zk.ErrNoAuth, "NoAuth"},
	{zk.ErrBadVersion, "BadVersion"}, {zk.ErrNotEmpty, "NotEmpty"},
	{zk.ErrNoChildrenForEphemerals, "NoChildrenForEphemerals"}, {zk.ErrSessionExpired, "SessionExpired"},
	{zk.ErrInvalidACL, "InvalidACL"}, {zk.ErrAuthFailed, "AuthFailed"}, {zk.ErrBadArguments, "BadArguments"},
	{zk.ErrAPIError, "APIError"}, {zk.ErrConnectionClosed, "ConnectionClosed"}, {zk.ErrNoServer, "NoServer"},
	{zk.ErrClosing, "Closing"}, {zk.ErrSessionMoved, "SessionMoved"},
	{errWatchTimeout, "WatchTimeout"},
}

var unknownCode = regexp.MustCompile(`unknown error: (-?\d+)`)

func (t *zkTarget) errorName(err error) string {
	for _, e := range zkErrors {
		if errors.Is(err, e.err) {
			return e.name
		}
	}
	if m := unknownCode.FindStringSubmatch(err.Error()); m != nil {
		if n, perr := strconv.ParseInt(m[1], 10, 32); perr == nil {
			return encoding.ErrCode(n).String()
		}
	}
	return err.Error()
}
