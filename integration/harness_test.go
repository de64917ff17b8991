package integration

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/internal/zkserver"
	"github.com/zetcd/zetcd/zetcd"
)

// testConfig is the server configuration shared by zetcd and ZooKeeper in these tests: ZooKeeper
// runs with tickTime 2000, so sessions are clamped to [4s, 40s] on both.
var testConfig = zetcd.Config{
	MinSessionTimeout: 4 * time.Second,
	MaxSessionTimeout: 40 * time.Second,
}

// etcdCluster is an embedded etcd that one or more zetcd servers share.
type etcdCluster struct {
	etcd *embedetcd.Etcd
}

func startEtcd(t testing.TB) *etcdCluster {
	t.Helper()
	e, err := embedetcd.Start(embedetcd.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return &etcdCluster{etcd: e}
}

func (c *etcdCluster) client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := c.etcd.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// zetcdServer is one zetcd process-equivalent (backend + server + listener) in this test binary.
type zetcdServer struct {
	Addr    string
	srv     *zetcd.Server
	backend *zetcd.EtcdBackend
}

// startZetcdOn starts a zetcd serving on 127.0.0.1:0 in front of the given etcd.
func startZetcdOn(t testing.TB, c *etcdCluster, cfg zetcd.Config, kv clientv3.KV) *zetcdServer {
	t.Helper()
	cli := c.client(t)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := zetcd.NewEtcdBackend(ctx, zetcd.EtcdConfig{Client: cli, KV: kv, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = log
	srv := zetcd.NewServer(b, cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	z := &zetcdServer{Addr: ln.Addr().String(), srv: srv, backend: b}
	t.Cleanup(z.Stop)
	return z
}

// Stop closes the server's connections and listener (sessions survive in etcd).
func (z *zetcdServer) Stop() {
	z.srv.Close()
	z.backend.Close()
}

// startZetcd starts a fresh etcd and one zetcd in front of it.
func startZetcd(t testing.TB) string {
	return startZetcdOn(t, startEtcd(t), testConfig, nil).Addr
}

// startZooKeeper starts a fresh real ZooKeeper 3.9 (skipped on developer machines without it,
// never in CI).
func startZooKeeper(t testing.TB) string {
	return zkserver.Start(t, zkserver.Options{}).Addr
}

// servers are the implementations every behaviour test runs against, with the same expectations.
var servers = []struct {
	name  string
	start func(testing.TB) string
}{
	{"zetcd", startZetcd},
	{"zookeeper", startZooKeeper},
}

// forEachServer runs f against a fresh zetcd and a fresh ZooKeeper.
func forEachServer(t *testing.T, f func(t *testing.T, addr string)) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) { f(t, s.start(t)) })
	}
}

// connect opens a go-zookeeper session and waits until it has one.
func connect(t testing.TB, addr string) *zk.Conn {
	t.Helper()
	conn, events, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return conn
			}
		case <-deadline:
			t.Fatalf("no session from %s after 20s", addr)
		}
	}
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

var openACL = zk.WorldACL(zk.PermAll)
