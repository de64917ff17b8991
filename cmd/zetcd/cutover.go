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
// to ZooKeeper onto zetcd, sessions, ephemerals and watches with them, on every process of the
// migration at once (agreement.go): until the import marker is deleted, a failure hands every
// process's clients back to ZooKeeper; once it is, every process serves them from zetcd. This
// file is each process's part; copier.go is the copier's.

// The cutover's states, on GET /migrate.
const (
	cutoverNone    = ""             // not asked for, or handed back to ZooKeeper after a failure
	cutoverRunning = "cutting-over" // the steps are running; new connections are held from holding on
	cutoverDone    = "done"         // zetcd serves every client
)

// cutoverTimeout bounds the first catch-up of a cutover, and its steps from holding new
// connections on every process to the deletion of the import marker.
var cutoverTimeout = 2 * time.Minute

// migrator is one process's migration mode: its client ports, relay, part in the agreement
// (agreement.go), and, if elected, the copy (copier.go).
type migrator struct {
	o      options
	log    *zap.Logger
	ctx    context.Context // the migration's
	etcd   *etcdConn
	mc     etcdstore.MirrorConfig
	ag     *agreement
	relay  *zkrelay.Relay
	queues []*connQueue
	// serveErr gets a client port's failure while relaying, and zetcd's end after the cutover.
	serveErr chan error
	copying  sync.WaitGroup // the copier's goroutines

	// Only the look loop (watchAgreement) uses these.
	heldFor     string            // the cutover this process holds new connections for
	reported    string            // the cutover it reported holding for
	before      []zkrelay.Session // the relayed sessions when it stopped relaying
	coordinated string            // the copier: the newest cutover it ran

	mu       sync.Mutex
	m        *migrate.Migration // the copy, once this process is elected copier
	view     common             // the agreement as last read
	stop     chan struct{}      // closed to hold new connections
	relaying sync.WaitGroup
	settled  map[string]string // the cutovers that ended, by id: "" done, else why they failed
	errors   []string          // the cutovers' failures, each with its time
	serving  bool
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
	// By is the process that asked for the cutover.
	By string `json:"by,omitempty"`
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

// lookInterval is how often each process reads the agreement.
const lookInterval = 100 * time.Millisecond

// watchAgreement reads the agreement every lookInterval and does what it asks, until zetcd
// serves or ctx ends.
func (mg *migrator) watchAgreement(ctx context.Context) {
	t := time.NewTicker(lookInterval)
	defer t.Stop()
	for !mg.isServing() {
		mg.look(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// look reads the agreement once and follows the common cutover: a process holds new
// connections while it is held, serves once it is done, and relays in every other state.
func (mg *migrator) look(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := mg.ag.read(rctx)
	if err != nil {
		mg.log.Debug("migration: reading the agreement", zap.Error(err))
		return
	}
	mg.mu.Lock()
	mg.view = c
	mg.mu.Unlock()
	cut := c.cutover
	switch {
	case cut != nil && cut.State == commonDone:
		mg.serve(*cut)
		return
	case cut != nil && cut.State == commonHolding:
		mg.holdFor(rctx, cut.ID)
	default:
		mg.relayAgain(cut)
	}
	if err := mg.ag.register(rctx); err != nil {
		mg.log.Debug("migration: registering the process", zap.Error(err))
	}
	if err := mg.ag.recordSessions(rctx, mg.relay.Sessions()); err != nil {
		mg.log.Debug("migration: recording the relayed sessions", zap.Error(err))
	}
	if cut != nil && cut.State == commonRequested && mg.coordinated != cut.ID && mg.copy() != nil {
		mg.coordinated = cut.ID
		mg.copying.Add(1)
		go func() {
			defer mg.copying.Done()
			mg.coordinate(*cut, c.cutoverRev)
		}()
	}
}

// holdFor holds new connections for the cutover id, closes the relayed ones, and reports the
// relayed sessions once none is connected.
func (mg *migrator) holdFor(ctx context.Context, id string) {
	if mg.heldFor == "" {
		mg.log.Info("cutover: holding new connections, closing the relayed ones", zap.String("cutover", id))
		mg.holdConnections()
		mg.before = mg.relay.Sessions()
		mg.relay.CloseAll()
	}
	mg.heldFor = id
	if mg.reported == id {
		return
	}
	sessions, err := mg.quiet(ctx)
	if err != nil {
		mg.log.Warn("cutover: waiting for the relayed connections to close", zap.Error(err))
		return
	}
	h := heldRecord{Cutover: id, Sessions: liveSessions(mg.before, sessions)}
	if err := mg.ag.hold(ctx, h); err != nil {
		mg.log.Warn("cutover: reporting the held connections", zap.Error(err))
		return
	}
	mg.reported = id
}

// relayAgain relays again if this process held new connections for a cutover that is no
// longer held (cut: the common cutover now, nil if none), and settles the cutover that ended.
func (mg *migrator) relayAgain(cut *commonCutover) {
	if cut != nil && cut.State == commonHandedBack {
		mg.settle(cut.ID, cut.Error)
	}
	if mg.heldFor == "" {
		return
	}
	if cut == nil || cut.ID != mg.heldFor {
		mg.settle(mg.heldFor, "the cutover ended without an answer: its copier went away")
	}
	mg.log.Info("cutover handed back: relaying clients to ZooKeeper again", zap.String("cutover", mg.heldFor))
	mg.heldFor, mg.reported, mg.before = "", "", nil
	mg.startRelaying()
}

// settle records how the cutover id ended, once: why it failed, or "" if done.
func (mg *migrator) settle(id, why string) {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	if mg.settled == nil {
		mg.settled = map[string]string{}
	}
	if _, ok := mg.settled[id]; ok {
		return
	}
	mg.settled[id] = why
	if why != "" {
		mg.log.Warn("cutover failed: clients stay on ZooKeeper", zap.String("cutover", id), zap.String("error", why))
		mg.errors = append(mg.errors, time.Now().UTC().Format(time.RFC3339)+" "+why)
	}
}

// serve starts zetcd on the client ports, the relaying stopped and the relayed connections
// closed, once the import marker is gone.
func (mg *migrator) serve(cut commonCutover) {
	if mg.heldFor == "" {
		mg.holdConnections()
		mg.relay.CloseAll()
		mg.heldFor = cut.ID
	}
	if m := mg.copy(); m != nil {
		m.Stop()
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
	mg.mu.Lock()
	mg.serving = true
	mg.mu.Unlock()
	select {
	case <-ready:
		mg.settle(cut.ID, "")
		mg.log.Info("cutover done: zetcd serves every client", zap.String("cutover", cut.ID))
	case <-exited:
		mg.settle(cut.ID, "zetcd did not start; see its log")
	case <-time.After(cutoverTimeout):
		mg.settle(cut.ID, fmt.Sprintf("zetcd did not start within %s; see its log", cutoverTimeout))
	case <-mg.ctx.Done():
	}
}

func (mg *migrator) isServing() bool {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	return mg.serving
}

// copy is the copy this process runs, nil unless it is the copier.
func (mg *migrator) copy() *migrate.Migration {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	return mg.m
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
func liveSessions(before, after []zkrelay.Session) []sessionRecord {
	connected := map[int64]bool{}
	for _, s := range before {
		connected[int64(s.ID)] = s.Connected
	}
	var out []sessionRecord
	for _, s := range after {
		if s.Closed || s.Expired || !connected[int64(s.ID)] && time.Since(s.DisconnectedAt) >= s.Timeout {
			continue
		}
		out = append(out, sessionRecord{MigratedSession: etcdstore.MigratedSession{ID: int64(s.ID), Passwd: s.Passwd,
			TimeoutMs: int32(s.Timeout.Milliseconds())}, LastZxid: int64(s.LastZxid)})
	}
	return out
}

// others names ZooKeeper's sessions that its `cons` lists and that are neither relayed through
// a zetcd process of the migration (their records) nor the copy's own (the follower's);
// unread says why a server's `cons` could not be read.
func (mg *migrator) others(ctx context.Context, follower int64) (others, unread []string, err error) {
	recorded, err := mg.ag.recordedSessions(ctx)
	if err != nil {
		return nil, nil, err
	}
	conns, unread := zklive.Connections(zklive.Config{Servers: mg.o.migrate.from})
	delete(conns, follower)
	for id := range recorded {
		delete(conns, id)
	}
	for _, s := range mg.relay.Sessions() {
		delete(conns, int64(s.ID))
	}
	for id, addr := range conns {
		others = append(others, fmt.Sprintf("session %#x from %s", id, addr))
	}
	slices.Sort(others)
	return others, unread, nil
}

// request asks every process for a cutover (A cutover, on the copier's lease), unless one runs
// or is done, the copy cannot be cut over, or, unless force, ZooKeeper has clients that the
// cutover would not move; it returns the cutover's id and the revision it was asked at.
func (mg *migrator) request(ctx context.Context, force bool) (string, int64, error) {
	c, err := mg.ag.read(ctx)
	if err != nil {
		return "", 0, err
	}
	if m := mg.copy(); m != nil { // newer than the status published
		c.status = &copierStatus{Status: m.Status(), Copier: mg.ag.id, Follower: m.SessionID()}
	}
	if err := cutoverRefusal(c); err != nil {
		return "", 0, err
	}
	if !force {
		others, unread, err := mg.others(ctx, c.status.Follower)
		switch {
		case err != nil:
			return "", 0, err
		case len(others) > 0:
			return "", 0, fmt.Errorf("ZooKeeper serves clients not relayed through zetcd, which the cutover would leave on it: %s (move them to zetcd, or force=true)", strings.Join(others, "; "))
		case len(unread) > 0:
			return "", 0, fmt.Errorf("cannot tell which clients ZooKeeper serves: %s (allow cons in 4lw.commands.whitelist, or force=true)", strings.Join(unread, "; "))
		}
	}
	lease, err := mg.ag.copierLease(ctx)
	if err != nil || lease == 0 {
		return "", 0, fmt.Errorf("no copier is elected: %v", err)
	}
	cut := commonCutover{ID: fmt.Sprintf("%s-%x", mg.ag.id, time.Now().UnixNano()), State: commonRequested, By: mg.ag.id, Started: time.Now().UTC()}
	rev, err := mg.ag.putCutover(ctx, c.cutoverRev, cut, lease)
	if errors.Is(err, errStale) {
		return "", 0, errors.New("a cutover is running")
	}
	return cut.ID, rev, err
}

// cutoverRefusal says why the agreement c cannot start a cutover, nil if it can.
func cutoverRefusal(c common) error {
	switch {
	case c.failed != "":
		return fmt.Errorf("the migration failed: %s", c.failed)
	case c.cutover != nil && c.cutover.State == commonDone:
		return errors.New("the cutover is done: zetcd serves every client")
	case c.cutover != nil && c.cutover.State != commonHandedBack:
		return errors.New("a cutover is running")
	case c.status == nil:
		return errors.New("the copy has not started")
	case c.status.State == migrate.StateLoading || c.status.State == migrate.StateFailed:
		return fmt.Errorf("the copy is %s", c.status.State)
	}
	return nil
}

// await waits until this process has seen the cutover id end, and returns why it failed.
func (mg *migrator) await(ctx context.Context, id string, asked int64) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		mg.mu.Lock()
		why, ok := mg.settled[id]
		v := mg.view
		mg.mu.Unlock()
		switch {
		case ok && why == "":
			return nil
		case ok:
			return errors.New(why)
		case v.rev > asked && (v.cutover == nil || v.cutover.ID != id):
			return errors.New("the cutover ended without an answer: its copier went away")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// cutoverHandler answers POST /migrate/cutover: it asks every process for the cutover, and
// answers its outcome.
func (mg *migrator) cutoverHandler(w http.ResponseWriter, r *http.Request) {
	force, _ := strconv.ParseBool(r.URL.Query().Get("force"))
	id, asked, err := mg.request(r.Context(), force)
	if err != nil {
		http.Error(w, "cutover refused: "+err.Error(), http.StatusConflict)
		return
	}
	if err := mg.await(r.Context(), id, asked); err != nil {
		http.Error(w, "cutover failed, clients stay on ZooKeeper: "+err.Error(), http.StatusInternalServerError)
		return
	}
	fmt.Fprintln(w, "cutover done: zetcd serves every client")
}

// cutoverState is the cutover's status now, as this process sees it.
func (mg *migrator) cutoverState() cutoverStatus {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	s := cutoverStatus{Errors: append([]string(nil), mg.errors...)}
	cut := mg.view.cutover
	if cut == nil || cut.State == commonHandedBack {
		return s
	}
	s.Started, s.By, s.Step = cut.Started, cut.By, cut.Step
	s.ZooKeeperZxid, s.TakenOver, s.Skipped = cut.ZooKeeperZxid, cut.TakenOver, cut.Skipped
	switch {
	case mg.serving:
		s.State, s.Step = cutoverDone, ""
	case cut.State == commonDone:
		s.State, s.Step = cutoverRunning, "starting zetcd"
	default:
		s.State = cutoverRunning
	}
	return s
}

// served is zetcd's operator endpoint once it serves, or nil.
func (mg *migrator) served() http.Handler {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	return mg.zetcd
}
