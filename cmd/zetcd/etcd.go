package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/internal/memberguard"
)

// etcdConn is zetcd's way to etcd: the embedded etcd it started (without --endpoints), the
// client, and the member guard (with --endpoints naming more than one member).
type etcdConn struct {
	embedded  *embedetcd.Etcd // nil with --endpoints
	endpoints []string
	cli       *clientv3.Client
	leases    pb.LeaseClient     // the embedded etcd's lease API in process; nil with --endpoints
	guard     *memberguard.Guard // nil unless it runs
	stopGuard func()             // stops the guard and waits for it
}

// connectEtcd starts the embedded etcd (without --endpoints) or dials the external one, and
// starts the member guard if there is one.
func connectEtcd(o options, log *zap.Logger) (*etcdConn, error) {
	c := &etcdConn{}
	if o.endpoints == "" {
		e, err := startEmbedded(o, log)
		if err != nil {
			return nil, err
		}
		c.embedded = e
		c.endpoints = []string{e.Endpoint}
	} else {
		c.endpoints = strings.Split(o.endpoints, ",")
	}
	var err error
	c.cli, c.leases, c.guard, err = etcdClient(o, log, c.embedded, c.endpoints)
	if err != nil {
		c.close()
		return nil, err
	}
	if c.guard != nil {
		c.stopGuard = runGuard(c.guard)
	}
	return c, nil
}

// close stops the guard, then closes the client, then the embedded etcd: the caller stops
// the server and the store first, so nothing is in flight when etcd stops.
func (c *etcdConn) close() {
	if c.stopGuard != nil {
		c.stopGuard()
	}
	if c.cli != nil {
		c.cli.Close()
	}
	if c.embedded != nil {
		c.embedded.Close()
	}
}

// failed reports the embedded etcd's failure; nil (never ready) with --endpoints.
func (c *etcdConn) failed() <-chan error {
	if c.embedded == nil {
		return nil
	}
	return c.embedded.Err()
}

// startEmbedded starts the embedded etcd in --data-dir and clears a NOSPACE alarm it kept
// from before a restart.
func startEmbedded(o options, log *zap.Logger) (*embedetcd.Etcd, error) {
	e, err := embedetcd.Start(embedetcd.Config{
		Dir:               o.dataDir,
		ClientURL:         o.embeddedClientURL,
		Logger:            atLeastWarn(log.Named("etcd")),
		QuotaBackendBytes: o.quotaBytes,
		Compactor:         true,
		BulkLoad:          o.bulkLoad,
	})
	if err != nil {
		return nil, err
	}
	log.Info("embedded etcd started", zap.String("data-dir", o.dataDir), zap.String("endpoint", e.Endpoint))
	// Before zetcd's first writes, which etcd refuses while a NOSPACE alarm it kept from
	// before the restart is raised (the compactor, which disarms it, starts after them).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	err = e.RecoverSpace(ctx, log.Named("compactor"))
	cancel()
	if err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// etcdClient connects to etcd: to the embedded one in process (its lease API as a raw client
// too), to an external one over gRPC (leases nil: the store builds it on the connection). guard,
// if not nil, is to keep the client off members that stop answering; the caller runs it.
func etcdClient(o options, log *zap.Logger, embedded *embedetcd.Etcd, endpoints []string) (cli *clientv3.Client, leases pb.LeaseClient, guard *memberguard.Guard, err error) {
	if embedded != nil {
		cli, leases = embedded.InProcessClient()
		return cli, leases, nil, nil
	}
	etcdTLS, err := o.security.etcdTLS()
	if err != nil {
		return nil, nil, nil, err
	}
	var dialOpts []grpc.DialOption
	var dialer *memberguard.Dialer
	if len(endpoints) > 1 && o.etcdSilence > 0 {
		dialer = &memberguard.Dialer{UserTimeout: o.etcdKeepAliveWait}
		dialOpts = append(dialOpts, grpc.WithContextDialer(dialer.Dial))
	}
	cli, err = clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		DialOptions: dialOpts,
		// Requests ZooKeeper accepts can make etcd requests larger than gRPC's default
		// (embedetcd.MaxRequestBytes); an external etcd needs --max-request-bytes to match.
		MaxCallSendMsgSize: embedetcd.ClientMaxCallSendMsgSize,
		// The client spreads requests and streams over the members; a member that stops
		// answering (a frozen process, a partition that keeps the TCP connection) would hold
		// what was sent to it, the committer's transaction among them, for as long as it is
		// frozen. The member guard gives it up after --etcd-member-silence when another member
		// answers; the keepalive closes the connection to it in any case, failing what was in
		// flight there (the clients of those requests reconnect) and moving the streams to the
		// others. It pings only a connection with requests or streams on it: etcd answers pings
		// on an idle connection with "too many pings" and closes it (its PermitWithoutStream is
		// false).
		DialKeepAliveTime:    o.etcdKeepAlive,
		DialKeepAliveTimeout: o.etcdKeepAliveWait,
		Logger:               embedetcd.Quiet(atLeastWarn(log.Named("etcd-client"))),
		TLS:                  etcdTLS,
		Username:             o.security.etcdUser,
		Password:             o.security.etcdPassword,
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("connect to etcd %v: %w", endpoints, err)
	}
	if dialer != nil {
		guard = memberguard.New(memberguard.Config{
			Client:    cli,
			Dialer:    dialer,
			Endpoints: endpoints,
			ProbeKey:  o.prefix,
			Silence:   o.etcdSilence,
			Logger:    log.Named("etcd-members"),
		})
	}
	return cli, nil, guard, nil
}

// runGuard runs the member guard until the returned stop, which waits for it to return.
func runGuard(guard *memberguard.Guard) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		guard.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// atLeastWarn quiets etcd's own chatter to warnings, without lowering a stricter level: zap
// refuses (and complains about) an IncreaseLevel that would not increase it.
func atLeastWarn(l *zap.Logger) *zap.Logger {
	if l.Core().Enabled(zap.InfoLevel) {
		return l.WithOptions(zap.IncreaseLevel(zap.WarnLevel))
	}
	return l
}
