package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/etcdstore"
	"github.com/zetcd/zetcd/migrate"
	"github.com/zetcd/zetcd/zkrelay"
)

// The agreement of the zetcd processes of one migration (docs/migration.md, "Several
// processes"), in etcd under the store's prefix (etcdstore.MigrationKeys, "A" below):
//
//	A p/<process>             each process, on its lease: present while it lives
//	A s/<process>/<session>   the sessions it relays, on its lease (sessionRecord)
//	A copier                  the process that copies (the copier), on its lease
//	A loading                 on the copier's lease while its copy loads: every other write
//	                          of the agreement compares that it is absent (loadGuard)
//	A status                  the copy's status, on the copier's lease (copierStatus)
//	A failed                  no lease: the migration failed on every process, and why
//	A cutover                 the cutover (commonCutover): on the copier's lease until it is
//	                          done, which the import marker's deletion writes, without a lease
//	A held/<process>          on its lease: the process holds new connections for a cutover,
//	                          its relayed sessions final (heldRecord)
//
// Every key a process writes on its lease goes with it: a dead process's sessions are
// recorded again by the process its clients resume on. The copy's load numbers zxids by the
// revisions it expects its own writes to get (etcdstore.Import), so nothing else may write to
// etcd meanwhile: a write guarded by A loading that fails moves no revision.

// agreementTTL is the TTL in seconds of each process's lease: how long a dead process is
// counted alive.
var agreementTTL = 5

// The common cutover's states.
const (
	commonRequested  = "requested"   // asked for; the copier catches up
	commonHolding    = "holding"     // every process holds new connections and reports it
	commonDone       = "done"        // the import marker is gone: zetcd serves
	commonHandedBack = "handed-back" // failed before the marker went: every process relays again
)

// commonCutover is the value of A cutover.
type commonCutover struct {
	ID            string    `json:"id"`
	State         string    `json:"state"`
	Step          string    `json:"step,omitempty"`
	By            string    `json:"by"`
	Started       time.Time `json:"started"`
	Error         string    `json:"error,omitempty"`
	ZooKeeperZxid string    `json:"zookeeperZxid,omitempty"`
	TakenOver     []string  `json:"takenOver,omitempty"`
	Skipped       []string  `json:"skipped,omitempty"`
}

// sessionRecord is the value of A s/<process>/<session>: what a cutover needs of a relayed
// session, and whether a connection serves it.
type sessionRecord struct {
	etcdstore.MigratedSession
	LastZxid  int64 `json:"lastZxid"`
	Connected bool  `json:"connected"`
}

// heldRecord is the value of A held/<process>: the process holds new connections for the
// cutover Cutover, and Sessions are its relayed sessions that ZooKeeper still holds, final.
type heldRecord struct {
	Cutover  string          `json:"cutover"`
	Sessions []sessionRecord `json:"sessions"`
}

// copierStatus is the value of A status.
type copierStatus struct {
	migrate.Status
	Copier   string `json:"copier"`
	Follower int64  `json:"follower"` // the session that follows ZooKeeper
}

// agreement is one process's part in the agreement.
type agreement struct {
	cli     *clientv3.Client
	base    string // A
	sess    *concurrency.Session
	id      string // the process's: its lease's id
	log     *zap.Logger
	written map[string]string // the session records put, by key
	// registered: A p/<process> is put. Only the look loop uses it and written.
	registered bool
}

// joinAgreement takes a lease for the process and registers it; it refuses a prefix that holds
// another migration's copy.
func joinAgreement(ctx context.Context, cli *clientv3.Client, prefix, source string, log *zap.Logger) (*agreement, error) {
	marker, ok, err := etcdstore.ImportMarker(ctx, cli, prefix)
	if err != nil {
		return nil, fmt.Errorf("migration: read the import marker: %w", err)
	}
	if ok && !etcdstore.IsMirrorOf(marker, source) {
		return nil, fmt.Errorf("migration: the prefix %q holds another copy or import: %q", prefix, marker)
	}
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(agreementTTL), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return nil, fmt.Errorf("migration: a lease for the agreement: %w", err)
	}
	a := &agreement{cli: cli, base: etcdstore.MigrationKeys(prefix), sess: sess, id: fmt.Sprintf("%016x", int64(sess.Lease())),
		log: log, written: map[string]string{}}
	return a, nil
}

// loadGuard compares that no copy loads.
func (a *agreement) loadGuard() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(a.base+"loading"), "=", 0)
}

// write does ops unless a copy loads, and reports whether it did.
func (a *agreement) write(ctx context.Context, ops ...clientv3.Op) (bool, error) {
	t, err := a.cli.Txn(ctx).If(a.loadGuard()).Then(ops...).Commit()
	if err != nil {
		return false, err
	}
	return t.Succeeded, nil
}

// register registers the process, unless it is or a copy loads; the cutover waits for the
// processes registered.
func (a *agreement) register(ctx context.Context) error {
	if a.registered {
		return nil
	}
	ok, err := a.write(ctx, clientv3.OpPut(a.base+"p/"+a.id, "", clientv3.WithLease(a.sess.Lease())))
	a.registered = ok
	return err
}

// close revokes the process's lease: its keys go.
func (a *agreement) close() { a.sess.Close() }

// claim makes the process the copier if there is none, and then marks its copy loading; a
// claim that fails writes nothing.
func (a *agreement) claim(ctx context.Context) (bool, error) {
	lease := clientv3.WithLease(a.sess.Lease())
	t, err := a.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(a.base+"copier"), "=", 0)).
		Then(clientv3.OpPut(a.base+"copier", a.id, lease), clientv3.OpPut(a.base+"loading", "", lease)).Commit()
	if err != nil {
		return false, err
	}
	return t.Succeeded, nil
}

// loaded deletes the copier's mark that its copy loads.
func (a *agreement) loaded(ctx context.Context) error {
	_, err := a.cli.Delete(ctx, a.base+"loading")
	return err
}

// copierLease is the lease of the copier, 0 if there is none.
func (a *agreement) copierLease(ctx context.Context) (clientv3.LeaseID, error) {
	r, err := a.cli.Get(ctx, a.base+"copier")
	if err != nil || len(r.Kvs) == 0 {
		return 0, err
	}
	return clientv3.LeaseID(r.Kvs[0].Lease), nil
}

// fail records that the migration failed on every process, unless one failure is recorded.
func (a *agreement) fail(ctx context.Context, why string) error {
	_, err := a.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(a.base+"failed"), "=", 0)).
		Then(clientv3.OpPut(a.base+"failed", why)).Commit()
	return err
}

// common is what every process reads of the agreement at each look.
type common struct {
	cutover    *commonCutover // nil: none
	cutoverRev int64          // its ModRevision
	rev        int64          // etcd's revision read at
	failed     string
	status     *copierStatus // nil: no copier publishes one
	processes  map[string]bool
	held       map[string]heldRecord
}

// read reads the agreement's common keys in one transaction.
func (a *agreement) read(ctx context.Context) (common, error) {
	t, err := a.cli.Txn(ctx).Then(clientv3.OpGet(a.base+"cutover"), clientv3.OpGet(a.base+"failed"),
		clientv3.OpGet(a.base+"status"), clientv3.OpGet(a.base+"p/", clientv3.WithPrefix()),
		clientv3.OpGet(a.base+"held/", clientv3.WithPrefix())).Commit()
	if err != nil {
		return common{}, err
	}
	c := common{rev: t.Header.Revision}
	if kvs := t.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		c.cutover, c.cutoverRev = &commonCutover{}, kvs[0].ModRevision
		if err := json.Unmarshal(kvs[0].Value, c.cutover); err != nil {
			return common{}, fmt.Errorf("migration: corrupt cutover key: %w", err)
		}
	}
	if kvs := t.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		c.failed = string(kvs[0].Value)
	}
	if kvs := t.Responses[2].GetResponseRange().Kvs; len(kvs) > 0 {
		c.status = &copierStatus{}
		if err := json.Unmarshal(kvs[0].Value, c.status); err != nil {
			return common{}, fmt.Errorf("migration: corrupt status key: %w", err)
		}
	}
	c.processes = map[string]bool{}
	for _, kv := range t.Responses[3].GetResponseRange().Kvs {
		c.processes[strings.TrimPrefix(string(kv.Key), a.base+"p/")] = true
	}
	c.held = map[string]heldRecord{}
	for _, kv := range t.Responses[4].GetResponseRange().Kvs {
		var h heldRecord
		if json.Unmarshal(kv.Value, &h) == nil {
			c.held[strings.TrimPrefix(string(kv.Key), a.base+"held/")] = h
		}
	}
	return c, nil
}

// putCutover writes c if the cutover key's ModRevision is still rev (0: absent), on lease (0:
// none), and returns its new ModRevision; errStale if the key changed. A key that changed to c
// itself, on lease, was written by an earlier attempt whose answer was lost (etcd's leader
// paused, a connection closed): that is success, at the key's ModRevision.
func (a *agreement) putCutover(ctx context.Context, rev int64, c commonCutover, lease clientv3.LeaseID) (int64, error) {
	b, _ := json.Marshal(c)
	t, err := a.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(a.base+"cutover"), "=", rev), a.loadGuard()).
		Then(clientv3.OpPut(a.base+"cutover", string(b), clientv3.WithLease(lease))).
		Else(clientv3.OpGet(a.base + "cutover")).Commit()
	switch {
	case err != nil:
		return 0, err
	case t.Succeeded:
		return t.Header.Revision, nil
	}
	if kvs := t.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 && string(kvs[0].Value) == string(b) && kvs[0].Lease == int64(lease) {
		return kvs[0].ModRevision, nil
	}
	return 0, errStale
}

// errStale: the cutover key changed since it was read.
var errStale = errors.New("the cutover changed meanwhile")

// publishStatus puts the copy's status, on the copier's lease.
func (a *agreement) publishStatus(ctx context.Context, m *migrate.Migration) error {
	b, _ := json.Marshal(copierStatus{Status: m.Status(), Copier: a.id, Follower: m.SessionID()})
	_, err := a.write(ctx, clientv3.OpPut(a.base+"status", string(b), clientv3.WithLease(a.sess.Lease())))
	return err
}

// hold reports that the process holds new connections for the cutover id, with its final
// sessions.
func (a *agreement) hold(ctx context.Context, h heldRecord) error {
	b, _ := json.Marshal(h)
	ok, err := a.write(ctx, clientv3.OpPut(a.base+"held/"+a.id, string(b), clientv3.WithLease(a.sess.Lease())))
	if err == nil && !ok {
		err = errors.New("a copy loads")
	}
	return err
}

// recordSessions writes the records of the relayed sessions ZooKeeper may still hold, and
// deletes the others', writing only what changed since the last call.
func (a *agreement) recordSessions(ctx context.Context, sessions []zkrelay.Session) error {
	now := map[string]string{}
	for _, s := range sessions {
		if s.Closed || s.Expired || !s.Connected && time.Since(s.DisconnectedAt) >= s.Timeout {
			continue
		}
		b, _ := json.Marshal(sessionRecord{MigratedSession: etcdstore.MigratedSession{ID: int64(s.ID), Passwd: s.Passwd,
			TimeoutMs: int32(s.Timeout.Milliseconds())}, LastZxid: int64(s.LastZxid), Connected: s.Connected})
		now[fmt.Sprintf("%ss/%s/%016x", a.base, a.id, int64(s.ID))] = string(b)
	}
	for k, v := range now {
		if a.written[k] == v {
			continue
		}
		if ok, err := a.write(ctx, clientv3.OpPut(k, v, clientv3.WithLease(a.sess.Lease()))); !ok {
			return err
		}
		a.written[k] = v
	}
	for k := range a.written {
		if _, ok := now[k]; !ok {
			if ok, err := a.write(ctx, clientv3.OpDelete(k)); !ok {
				return err
			}
			delete(a.written, k)
		}
	}
	return nil
}

// recordedSessions are the ids of the sessions every process records.
func (a *agreement) recordedSessions(ctx context.Context) (map[int64]bool, error) {
	r, err := a.cli.Get(ctx, a.base+"s/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	ids := map[int64]bool{}
	for _, kv := range r.Kvs {
		var s sessionRecord
		if json.Unmarshal(kv.Value, &s) == nil {
			ids[s.ID] = true
		}
	}
	return ids, nil
}
