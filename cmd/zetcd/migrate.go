package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os/signal"
	"strings"
	"syscall"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/etcdstore"
	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/internal/zklive"
	"github.com/zetcd/zetcd/migrate"
	"github.com/zetcd/zetcd/zkrelay"
)

// Migration mode (--migrate-from): zetcd copies a running ZooKeeper into its store and keeps
// the copy equal (package migrate; docs/migration.md, "Migration mode"), and answers the
// copy's progress on --metrics-addr as GET /migrate. It serves no client from the copy: every
// client connection is relayed to ZooKeeper (package zkrelay), which serves it. Several
// processes on one prefix make one migration: one of them copies (copier.go), each relays its
// own clients, and they agree through etcd on one cutover (agreement.go, cutover.go).

// migrateOptions are the migration mode's flags.
type migrateOptions struct {
	from []string      // --migrate-from, split
	auth []zklive.Auth // --migrate-auth, each scheme:credentials
}

func (m *migrateOptions) on() bool { return len(m.from) > 0 }

func (m *migrateOptions) register(fs *flag.FlagSet) {
	fs.Func("migrate-from", "migration mode: host:port,... of a running ZooKeeper (3.6+) to copy into the store and follow; see docs/migration.md, \"Migration mode\"", func(v string) error {
		for _, a := range strings.Split(v, ",") {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return fmt.Errorf("%q: %w", a, err)
			}
			m.from = append(m.from, a)
		}
		return nil
	})
	fs.Func("migrate-auth", "with --migrate-from: credentials added to the sessions that read ZooKeeper, as scheme:credentials (digest:user:pass); repeatable", func(v string) error {
		scheme, cred, ok := strings.Cut(v, ":")
		if !ok || scheme == "" || cred == "" {
			return fmt.Errorf("%q: want scheme:credentials, e.g. digest:user:pass", v)
		}
		m.auth = append(m.auth, zklive.Auth{Scheme: scheme, Auth: []byte(cred)})
		return nil
	})
}

// check refuses the flags migration mode cannot go with.
func (m *migrateOptions) check(o *options) error {
	switch {
	case !m.on() && len(m.auth) > 0:
		return errors.New("--migrate-auth needs --migrate-from")
	case m.on() && o.oracle != "":
		return errors.New("--migrate-from and --oracle cannot go together")
	}
	return nil
}

// runMigrate runs migration mode until SIGINT or SIGTERM, or a client port's failure.
func runMigrate(o options, log *zap.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return serveMigrate(ctx, o, log, nil)
}

// serveMigrate runs migration mode until ctx ends or a client port fails; started, if set, is
// told the client ports' and the metrics endpoint's addresses once they listen. A failed
// migration keeps its status on /migrate until then.
func serveMigrate(ctx context.Context, o options, log *zap.Logger, started func(clients []net.Addr, metrics net.Addr)) error {
	etcd, err := connectEtcd(o, log)
	if err != nil {
		return err
	}
	defer etcd.close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	mc := etcdstore.MirrorConfig{Client: etcd.cli, LeaseClient: etcd.leases, Prefix: o.prefix, Logger: log.Named("mirror"),
		MaxTxnOps: o.etcdMaxTxnOps}
	if etcd.embedded != nil {
		mc.MaxTxnOps, mc.MaxRequestBytes = embedetcd.MaxTxnOps, embedetcd.MaxRequestBytes
		// Nothing watches the copy: its history may go up to etcd's current revision.
		if err := etcd.embedded.StartCompactor(embedetcd.CompactorConfig{Logger: log.Named("compactor")}); err != nil {
			return err
		}
	}
	ag, err := joinAgreement(ctx, etcd.cli, o.prefix, fmt.Sprint(o.migrate.from), log.Named("agreement"))
	if err != nil {
		return err
	}
	defer ag.close()
	log.Info("migration mode", zap.Strings("zookeeper", o.migrate.from), zap.Strings("etcd", etcd.endpoints),
		zap.String("prefix", o.prefix), zap.String("process", ag.id))
	ports, err := o.security.listen(o.zkAddr)
	if err != nil {
		return err
	}
	relay := zkrelay.New(zkrelay.Config{Servers: o.migrate.from, MaxFrameBytes: o.maxFrameBytes, Logger: log.Named("relay")})
	defer relay.CloseAll()
	mg := &migrator{o: o, log: log, ctx: ctx, etcd: etcd, mc: mc, ag: ag, relay: relay, serveErr: make(chan error, len(ports)+2)}
	defer mg.copying.Wait()
	defer cancel() // before waiting for the copier
	var addrs []net.Addr
	for _, p := range ports {
		q := newConnQueue(p)
		defer q.Close()
		mg.queues = append(mg.queues, q)
		addrs = append(addrs, p.ln.Addr())
		log.Info("migration mode: relaying ZooKeeper clients to ZooKeeper", zap.String("addr", p.ln.Addr().String()))
	}
	mg.startRelaying()
	mg.copying.Add(2)
	go mg.runCopier(ctx)
	go func() {
		defer mg.copying.Done()
		mg.watchAgreement(ctx)
	}()
	go mg.watchLease(ctx)
	var metricsAddr net.Addr
	if o.metricsAddr != "" {
		ep, err := startHTTP(o.metricsAddr, migrateHandler(mg), log.Named("http"))
		if err != nil {
			return err
		}
		defer ep.stop()
		metricsAddr = ep.addr
		log.Info("serving the migration's status", zap.String("metrics-addr", ep.addr.String()))
	}
	if started != nil {
		started(addrs, metricsAddr)
	}
	select {
	case <-ctx.Done():
		if mg.isServing() {
			return <-mg.serveErr // zetcd drains on ctx's end
		}
		log.Info("stopping the migration")
		return nil
	case err := <-mg.serveErr:
		return err
	}
}

// watchLease stops migration mode with an error if the process loses its lease before zetcd
// serves: its agreement keys are gone, and a cutover would not count it.
func (mg *migrator) watchLease(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-mg.ag.sess.Done():
		if ctx.Err() == nil && !mg.isServing() {
			mg.serveErr <- errors.New("migration: the process lost its lease in etcd (its agreement keys with it): stopping; its clients resume on another zetcd process")
		}
	}
}

// copyStatus is the copy's status: the copier's own, or what it last published; failed, on
// every process, once the migration failed.
func (mg *migrator) copyStatus() migrate.Status {
	m := mg.copy()
	mg.mu.Lock()
	v := mg.view
	mg.mu.Unlock()
	var st migrate.Status
	switch {
	case m != nil:
		st = m.Status()
	case v.status != nil:
		st = v.status.Status
	default:
		st = migrate.Status{State: migrate.StateLoading}
	}
	if v.failed != "" {
		st.State, st.Errors = migrate.StateFailed, append(st.Errors, v.failed)
	}
	return st
}

// migrateHandler is the operator endpoint in migration mode: /migrate answers the migration's
// Status, the cutover's and the relayed sessions as JSON, POST /migrate/cutover runs the
// cutover (cutover.go), /healthz is 200 unless the migration failed. Once zetcd serves, the
// other paths and /healthz are its operator endpoint's (http.go).
func migrateHandler(mg *migrator) http.Handler {
	relay := mg.relay
	mux := http.NewServeMux()
	mux.HandleFunc("GET /migrate", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(migrateStatus{Status: mg.copyStatus(), Cutover: mg.cutoverState(), Relayed: relayedSessions(relay.Sessions()),
			Process: mg.ag.id, Copier: mg.copierID()})
	})
	mux.HandleFunc("POST /migrate/cutover", mg.cutoverHandler)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if h := mg.served(); h != nil {
			h.ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if h := mg.served(); h != nil {
			h.ServeHTTP(w, r)
			return
		}
		if s := mg.copyStatus(); s.State == migrate.StateFailed {
			http.Error(w, "migration failed: "+strings.Join(s.Errors, "; "), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// migrateStatus is what GET /migrate answers: the copy's progress, the common cutover, and the
// sessions relayed through this process.
type migrateStatus struct {
	migrate.Status
	Cutover cutoverStatus    `json:"cutover"`
	Relayed []relayedSession `json:"relayedSessions"`
	// Process is this process's id in the agreement, Copier the copier's (agreement.go).
	Process string `json:"process"`
	Copier  string `json:"copier,omitempty"`
}

// relayedSession is a relayed session as GET /migrate shows it: never its password.
type relayedSession struct {
	ID         string `json:"id"`
	TimeoutMs  int64  `json:"timeoutMs"`
	LastZxid   string `json:"lastZxid"`
	Server     string `json:"server"`
	Connected  bool   `json:"connected"`
	Closed     bool   `json:"closed,omitempty"`
	Expired    bool   `json:"expired,omitempty"`
	Ephemerals int    `json:"ephemerals"`
	Watches    int    `json:"watches"`
}

func relayedSessions(sessions []zkrelay.Session) []relayedSession {
	out := make([]relayedSession, 0, len(sessions))
	for _, s := range sessions {
		w := s.Watches
		out = append(out, relayedSession{
			ID: fmt.Sprintf("%#x", int64(s.ID)), TimeoutMs: s.Timeout.Milliseconds(), LastZxid: fmt.Sprintf("%#x", int64(s.LastZxid)),
			Server: s.Server, Connected: s.Connected, Closed: s.Closed, Expired: s.Expired, Ephemerals: len(s.Ephemerals),
			Watches: len(w.Data) + len(w.Exist) + len(w.Child) + len(w.Persistent) + len(w.PersistentRecursive),
		})
	}
	return out
}
