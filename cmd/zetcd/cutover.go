package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/etcdstore"
	"github.com/zetcd/zetcd/internal/zklive"
	"github.com/zetcd/zetcd/migrate"
	"github.com/zetcd/zetcd/zkrelay"
)

// The cutover (POST /migrate/cutover; docs/migration.md, "Cutover") moves the clients relayed
// to ZooKeeper onto zetcd, sessions, ephemerals and watches with them. Until the import marker
// is deleted, a failure hands the clients back to ZooKeeper; once it is, zetcd serves.

// The cutover's states, on GET /migrate.
const (
	cutoverNone    = ""             // not asked for, or handed back to ZooKeeper after a failure
	cutoverRunning = "cutting-over" // the steps are running; new connections are held
	cutoverDone    = "done"         // zetcd serves every client
	cutoverFailed  = "failed"       // the copy stopped and the import marker stayed: nothing serves
)

// cutoverTimeout bounds the first catch-up of a cutover, and its steps from the closing of the
// relayed connections to the deletion of the import marker and zetcd's start.
var cutoverTimeout = 2 * time.Minute

// errHeld is what a connQueue's accept answers once the relaying stops.
var errHeld = errors.New("relaying stopped")

// connQueue accepts a client port's connections and hands them to whoever serves them: the
// relay before the cutover, zetcd's server after it (as its net.Listener). Between the two they
// wait in it, accepted and not read: their clients see a connection that has not answered yet.
type connQueue struct {
	ln        net.Listener
	tls       bool
	conns     chan net.Conn
	failed    chan struct{} // closed when accepting failed, with err
	err       error
	closed    chan struct{}
	closeOnce sync.Once
}

func newConnQueue(p clientPort) *connQueue {
	q := &connQueue{ln: p.ln, tls: p.tls, conns: make(chan net.Conn), failed: make(chan struct{}), closed: make(chan struct{})}
	go q.run()
	return q
}

func (q *connQueue) run() {
	for {
		c, err := q.ln.Accept()
		if err != nil {
			q.err = err
			close(q.failed)
			return
		}
		select {
		case q.conns <- c:
		case <-q.closed:
			c.Close()
			return
		}
	}
}

// accept returns the next connection, or errHeld once stop is closed.
func (q *connQueue) accept(stop <-chan struct{}) (net.Conn, error) {
	select {
	case c := <-q.conns:
		return c, nil
	case <-q.failed:
		if errors.Is(q.err, net.ErrClosed) {
			return nil, net.ErrClosed
		}
		return nil, fmt.Errorf("serve %s: %w", q.ln.Addr(), q.err)
	case <-q.closed:
		return nil, net.ErrClosed
	case <-stop:
		return nil, errHeld
	}
}

func (q *connQueue) Accept() (net.Conn, error) { return q.accept(nil) }

func (q *connQueue) Close() error {
	q.closeOnce.Do(func() { close(q.closed) })
	return q.ln.Close()
}

func (q *connQueue) Addr() net.Addr { return q.ln.Addr() }

// migrator is migration mode's client ports, relay and copy, and its cutover.
type migrator struct {
	o      options
	log    *zap.Logger
	ctx    context.Context // the migration's
	etcd   *etcdConn
	m      *migrate.Migration
	relay  *zkrelay.Relay
	queues []*connQueue
	// serveErr gets a client port's failure while relaying, and zetcd's end after the cutover.
	serveErr chan error

	// last is ZooKeeper's last zxid at the cutover, the cutover's ZxidTable's Last. Only the
	// cutover's goroutine uses it.
	last int64

	mu       sync.Mutex
	stop     chan struct{} // closed to hold new connections
	relaying sync.WaitGroup
	status   cutoverStatus
	zetcd    http.Handler // zetcd's operator endpoint, once it serves
}

// cutoverStatus is the cutover's part of GET /migrate.
type cutoverStatus struct {
	State   string    `json:"state,omitempty"`
	Step    string    `json:"step,omitempty"`
	Started time.Time `json:"started,omitzero"`
	// ZooKeeperZxid is ZooKeeper's last zxid the copy held when the relaying stopped.
	ZooKeeperZxid string `json:"zookeeperZxid,omitempty"`
	// TakenOver and Skipped are the relayed sessions given to zetcd, and those that could not
	// be (ids that cannot be leases), by id.
	TakenOver []string `json:"takenOver,omitempty"`
	Skipped   []string `json:"skipped,omitempty"`
	// Errors are the cutovers' failures, each with its time.
	Errors []string `json:"errors,omitempty"`
}

// startRelaying hands each client port's connections to the relay until holdConnections.
func (mg *migrator) startRelaying() {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	mg.stop = make(chan struct{})
	for _, q := range mg.queues {
		mg.relaying.Add(1)
		go func() {
			defer mg.relaying.Done()
			mg.relayFrom(q, mg.stop)
		}()
	}
}

// relayFrom relays q's connections until stop closes or q fails.
func (mg *migrator) relayFrom(q *connQueue, stop <-chan struct{}) {
	for {
		conn, err := q.accept(stop)
		switch {
		case errors.Is(err, errHeld) || errors.Is(err, net.ErrClosed):
			return
		case err != nil:
			select {
			case mg.serveErr <- err:
			default: // a port's failure is already on its way
			}
			return
		}
		go mg.relay.Serve(mg.ctx, conn)
	}
}

// holdConnections stops handing new connections to the relay; they wait in their queues.
func (mg *migrator) holdConnections() {
	mg.mu.Lock()
	close(mg.stop)
	mg.mu.Unlock()
	mg.relaying.Wait()
}

// others names ZooKeeper's sessions that its `cons` lists and that are neither relayed through
// this zetcd nor the copy's own (the follower's); unread says why a server's `cons` could not
// be read.
func (mg *migrator) others() (others, unread []string) {
	conns, unread := zklive.Connections(zklive.Config{Servers: mg.o.migrate.from})
	delete(conns, mg.m.SessionID())
	for _, s := range mg.relay.Sessions() {
		delete(conns, int64(s.ID))
	}
	for id, addr := range conns {
		others = append(others, fmt.Sprintf("session %#x from %s", id, addr))
	}
	slices.Sort(others)
	return others, unread
}

// begin starts a cutover, unless one runs or is done, or, unless force, ZooKeeper has clients
// that the cutover would not move.
func (mg *migrator) begin(force bool) error {
	if !force {
		others, unread := mg.others()
		if len(others) > 0 {
			return fmt.Errorf("ZooKeeper serves clients not relayed through this zetcd, which the cutover would leave on it: %s (move them to zetcd, or force=true)", strings.Join(others, "; "))
		}
		if len(unread) > 0 {
			return fmt.Errorf("cannot tell which clients ZooKeeper serves: %s (allow cons in 4lw.commands.whitelist, or force=true)", strings.Join(unread, "; "))
		}
	}
	mg.mu.Lock()
	defer mg.mu.Unlock()
	switch mg.status.State {
	case cutoverRunning:
		return errors.New("a cutover is running")
	case cutoverDone:
		return errors.New("the cutover is done: zetcd serves every client")
	case cutoverFailed:
		return errors.New("a cutover failed after the copy stopped")
	}
	if st := mg.m.Status(); st.State == migrate.StateLoading || st.State == migrate.StateFailed {
		return fmt.Errorf("the copy is %s", st.State)
	}
	mg.status.State, mg.status.Step, mg.status.Started = cutoverRunning, "", time.Now().UTC()
	mg.status.TakenOver, mg.status.Skipped, mg.status.ZooKeeperZxid = nil, nil, ""
	return nil
}

func (mg *migrator) step(s string) {
	mg.log.Info("cutover: "+s, zap.String("step", s))
	mg.mu.Lock()
	mg.status.Step = s
	mg.mu.Unlock()
}

// cutover runs the cutover's steps; an error before the import marker's deletion hands the
// clients back to ZooKeeper, and the copy goes on following it.
func (mg *migrator) cutover() error {
	mg.step("holding new connections")
	mg.holdConnections()
	sessions, err := mg.takeOver()
	if err != nil {
		mg.log.Warn("cutover failed: clients stay on ZooKeeper", zap.Error(err))
		mg.mu.Lock()
		mg.status.State, mg.status.Step = cutoverNone, ""
		mg.status.Errors = append(mg.status.Errors, time.Now().UTC().Format(time.RFC3339)+" "+err.Error())
		mg.mu.Unlock()
		mg.startRelaying()
		return err
	}
	mg.step("starting zetcd")
	ctx, cancel := context.WithTimeout(mg.ctx, cutoverTimeout)
	defer cancel()
	mg.m.Stop()
	if err := mg.endMigration(ctx); err != nil {
		// The copy no longer follows ZooKeeper and may not be served: nothing serves.
		err = fmt.Errorf("cutover: %w; the copy stopped following ZooKeeper: restart with an empty prefix", err)
		mg.mu.Lock()
		mg.status.State = cutoverFailed
		mg.status.Errors = append(mg.status.Errors, time.Now().UTC().Format(time.RFC3339)+" "+err.Error())
		mg.mu.Unlock()
		mg.serveErr <- err
		return err
	}
	if mg.etcd.embedded != nil {
		mg.etcd.embedded.StopCompactor() // the store starts its own, on its progress
	}
	ports := make([]clientPort, len(mg.queues))
	for i, q := range mg.queues {
		ports[i] = clientPort{ln: q, tls: q.tls}
	}
	ready, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		mg.serveErr <- serveZetcd(mg.o, mg.log, mg.etcd, ports, handover{
			stop:    mg.ctx.Done(),
			setHTTP: func(h http.Handler) { mg.mu.Lock(); mg.zetcd = h; mg.mu.Unlock() },
			started: func() { close(ready) },
		})
	}()
	select {
	case <-ready:
	case <-exited:
		return errors.New("cutover: zetcd did not start; see its log")
	case <-ctx.Done():
		return fmt.Errorf("cutover: zetcd did not start: %w", ctx.Err())
	}
	mg.mu.Lock()
	mg.status.State, mg.status.Step = cutoverDone, ""
	mg.mu.Unlock()
	mg.log.Info("cutover done: zetcd serves every client", zap.Int("sessions", len(sessions)))
	return nil
}

// takeOver brings the copy up to ZooKeeper's last zxid with no relayed connection left, and
// writes the relayed sessions into the store; it returns the sessions taken over.
func (mg *migrator) takeOver() ([]etcdstore.MigratedSession, error) {
	cc := etcdstore.CutoverConfig{Client: mg.etcd.cli, LeaseClient: mg.etcd.leases, Prefix: mg.o.prefix, Logger: mg.log}
	// Catching up and padding first, while the relayed sessions still live on ZooKeeper,
	// leaves little to do once their connections are closed: padding past a ZooKeeper epoch
	// takes 65536 etcd revisions, and is not bounded by cutoverTimeout.
	mg.step("catching up")
	first, cancel := context.WithTimeout(mg.ctx, cutoverTimeout)
	z, err := mg.m.CatchUp(first)
	cancel()
	if err != nil {
		return nil, err
	}
	mg.step("padding etcd's revision")
	if err := etcdstore.PadPast(mg.ctx, cc, z); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(mg.ctx, cutoverTimeout)
	defer cancel()
	// The relayed connections close before the last catch-up: no relayed request reaches
	// ZooKeeper after it. Their clients reconnect, and wait with the new connections.
	mg.step("closing the relayed connections")
	before := mg.relay.Sessions()
	mg.relay.CloseAll()
	sessions, err := mg.quiet(ctx)
	if err != nil {
		return nil, err
	}
	mg.step("catching up with the relaying stopped")
	if z, err = mg.m.CatchUp(ctx); err != nil {
		return nil, err
	}
	var last int64
	mg.last = z
	for _, s := range sessions {
		last = max(last, int64(s.LastZxid))
	}
	if z < last {
		return nil, fmt.Errorf("cutover: ZooKeeper's last zxid %#x is below %#x, sent to a relayed session: the copy follows another ZooKeeper", z, last)
	}
	if err := etcdstore.PadPast(ctx, cc, z); err != nil {
		return nil, err
	}
	mg.step("taking over the relayed sessions")
	taken := liveSessions(before, sessions)
	skipped, err := etcdstore.TakeOver(ctx, cc, taken)
	if err != nil {
		return nil, err
	}
	mg.mu.Lock()
	mg.status.ZooKeeperZxid = fmt.Sprintf("%#x", z)
	for _, s := range taken {
		mg.status.TakenOver = append(mg.status.TakenOver, fmt.Sprintf("%#x", s.ID))
	}
	for _, id := range skipped {
		mg.status.Skipped = append(mg.status.Skipped, fmt.Sprintf("%#x", id))
		mg.log.Warn("cutover: a relayed session's id cannot be an etcd lease: it stays on ZooKeeper", zap.String("session", fmt.Sprintf("%#x", id)))
	}
	mg.mu.Unlock()
	return taken, nil
}

// quiet waits until no relayed connection is open, and returns the sessions' records then.
func (mg *migrator) quiet(ctx context.Context) ([]zkrelay.Session, error) {
	for {
		sessions := mg.relay.Sessions()
		open := 0
		for _, s := range sessions {
			if s.Connected {
				open++
			}
		}
		if open == 0 {
			return sessions, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cutover: %d relayed connections still open: %w", open, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// liveSessions are the sessions of after that ZooKeeper still holds: not closed, not expired,
// and connected in before or disconnected for less than their timeout.
func liveSessions(before, after []zkrelay.Session) []etcdstore.MigratedSession {
	connected := map[int64]bool{}
	for _, s := range before {
		connected[int64(s.ID)] = s.Connected
	}
	var out []etcdstore.MigratedSession
	for _, s := range after {
		if s.Closed || s.Expired || !connected[int64(s.ID)] && time.Since(s.DisconnectedAt) >= s.Timeout {
			continue
		}
		out = append(out, etcdstore.MigratedSession{ID: int64(s.ID), Passwd: s.Passwd, TimeoutMs: int32(s.Timeout.Milliseconds())})
	}
	return out
}

// endMigration deletes the import marker, again after etcd's errors until ctx ends; a marker
// already gone was deleted by an attempt whose answer was lost.
func (mg *migrator) endMigration(ctx context.Context) error {
	cc := etcdstore.CutoverConfig{Client: mg.etcd.cli, LeaseClient: mg.etcd.leases, Prefix: mg.o.prefix, Logger: mg.log}
	zxids, err := mg.m.Mapped()
	if err != nil {
		return err
	}
	table := etcdstore.ZxidTable{Last: mg.last, Zxids: zxids}
	pause := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := etcdstore.EndMigration(ctx, cc, table)
		if err == nil || attempt > 0 && errors.Is(err, etcdstore.ErrNoMarker) {
			return nil
		}
		mg.log.Warn("cutover: deleting the import marker, again after a pause", zap.Error(err))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// cutoverHandler answers POST /migrate/cutover: it runs the cutover and answers its outcome.
func (mg *migrator) cutoverHandler(w http.ResponseWriter, r *http.Request) {
	force, _ := strconv.ParseBool(r.URL.Query().Get("force"))
	if err := mg.begin(force); err != nil {
		http.Error(w, "cutover refused: "+err.Error(), http.StatusConflict)
		return
	}
	if err := mg.cutover(); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	fmt.Fprintln(w, "cutover done: zetcd serves every client")
}

// cutoverState is the cutover's status now.
func (mg *migrator) cutoverState() cutoverStatus {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	s := mg.status
	s.Errors = append([]string(nil), s.Errors...)
	return s
}

// served is zetcd's operator endpoint once it serves, or nil.
func (mg *migrator) served() http.Handler {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	return mg.zetcd
}
