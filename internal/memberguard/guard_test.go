package memberguard

import (
	"context"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"

	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/internal/testkit/tcpproxy"
)

// TestGuardLeavesSilentMemberOut: a client knows one etcd through two endpoints (proxies), and
// one of them goes silent with its connections open, as a frozen member does. The requests in
// flight through it fail within a Silence and a probe, those on the other endpoint succeed, the
// next ones all go to the other endpoint, and the silent one is taken back once it answers.
// Without the guard the requests on the silent endpoint would wait as long as it is silent
// (the client here has no keepalive). With etcd's authentication on, the probes (reads) carry
// the client's token.
func TestGuardLeavesSilentMemberOut(t *testing.T) {
	t.Run("plain", func(t *testing.T) { guardsSilentMember(t, false) })
	t.Run("etcd auth", func(t *testing.T) { guardsSilentMember(t, true) })
}

func guardsSilentMember(t *testing.T, auth bool) {
	const silence = time.Second
	e, u := startEtcd(t, auth)
	var user, password string
	if auth {
		user, password = "app", "app-password"
		enableAuth(t, e.Endpoint, user, password)
	}
	a, b := startProxy(t, u.Host), startProxy(t, u.Host)
	eps := []string{"http://" + a.Addr(), "http://" + b.Addr()}
	d := &Dialer{}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		Username: user, Password: password, DialOptions: []grpc.DialOption{grpc.WithContextDialer(d.Dial)}})
	if err != nil {
		t.Fatal(err)
	}
	g := New(Config{Client: cli, Dialer: d, Endpoints: eps, ProbeKey: "k", Silence: silence, Logger: zaptest.NewLogger(t)})
	var onLeave atomic.Int32 // calls of the OnLeave hook
	g.OnLeave(func() { onLeave.Add(1) })
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		g.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-stopped
		cli.Close()
	})
	for i := 0; i < 10; i++ {
		if _, err := put(cli, 5*time.Second); err != nil {
			t.Fatalf("put %d before the silence: %v", i, err)
		}
	}
	if d.open(a.Addr()) == 0 || d.open(b.Addr()) == 0 {
		t.Fatalf("connections before the silence: %d to a, %d to b; want some to each", d.open(a.Addr()), d.open(b.Addr()))
	}

	a.Freeze()
	// Eight puts at once: the client's round robin sends half of them through a.
	type result struct {
		took time.Duration
		err  error
	}
	results := make(chan result, 8)
	for range 8 {
		go func() {
			took, err := put(cli, 20*time.Second)
			results <- result{took, err}
		}()
	}
	failed, succeeded := 0, 0
	for range 8 {
		r := <-results
		t.Logf("put in flight at the silence: %v after %v", r.err, r.took.Round(time.Millisecond))
		if limit := silence + silence/2 + 2*time.Second; r.took > limit {
			t.Errorf("a put in flight at the silence took %v, over %v", r.took.Round(time.Millisecond), limit)
		}
		if r.err != nil {
			failed++
		} else {
			succeeded++
		}
	}
	if failed == 0 || succeeded == 0 {
		t.Errorf("puts in flight at the silence: %d failed (through a), %d succeeded (through b); want some of each", failed, succeeded)
	}
	if got := cli.Endpoints(); !slices.Equal(got, eps[1:]) {
		t.Errorf("endpoints with a silent: %v, want %v", got, eps[1:])
	}
	if out, leaves := g.LeftOut(); !slices.Equal(out, eps[:1]) || leaves != 1 {
		t.Errorf("LeftOut with a silent: %v, %d times; want %v, once", out, leaves, eps[:1])
	}
	// The hook runs once the connections are closed, which is what failed the puts above.
	for deadline := time.Now().Add(time.Second); onLeave.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := onLeave.Load(); n != 1 {
		t.Errorf("OnLeave called %d times with a left out, want once", n)
	}
	// A put routed to the silent member fails at its 5 s timeout; the bound below it leaves
	// room for a loaded machine.
	for i := 0; i < 20; i++ {
		if took, err := put(cli, 5*time.Second); err != nil || took > 3*time.Second {
			t.Errorf("put %d with a left out: %v after %v", i, err, took.Round(time.Millisecond))
		}
	}

	a.Thaw()
	deadline := time.Now().Add(5 * silence)
	for !slices.Equal(cli.Endpoints(), eps) {
		if time.Now().After(deadline) {
			t.Fatalf("endpoints %v after a answers again, want %v", cli.Endpoints(), eps)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, leaves := g.LeftOut(); len(out) != 0 || leaves != 1 {
		t.Errorf("LeftOut after a answers again: %v, %d times; want none, once", out, leaves)
	}
}

// enableAuth turns etcd's authentication on, with a root user and user, who may write the key
// k alone.
func enableAuth(t *testing.T, endpoint, user, password string) {
	t.Helper()
	root, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	// A bound for a hang, not a speed: etcd applies each step through raft and its disk.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i, step := range []func() error{
		func() error { _, err := root.UserAdd(ctx, "root", "root-password"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := root.RoleAdd(ctx, user); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, user, "k", "", clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := root.UserAdd(ctx, user, password); return err },
		func() error { _, err := root.UserGrantRole(ctx, user, user); return err },
		func() error { _, err := root.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("authentication setup, step %d: %v", i, err)
		}
	}
}

// put puts a key and reports how long it took.
func put(cli *clientv3.Client, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	_, err := cli.Put(ctx, "k", "v")
	return time.Since(start), err
}

func TestDecide(t *testing.T) {
	const silence = time.Second
	now := time.Unix(100, 0)
	heard, silent := now.Add(-silence/2), now.Add(-2*silence)
	members := func(heards ...time.Time) []*member {
		var ms []*member
		for i, h := range heards {
			ms = append(ms, &member{endpoint: string(rune('a' + i)), heard: h})
		}
		return ms
	}
	t.Run("one silent", func(t *testing.T) {
		ms := members(heard, silent, heard)
		in, left, back := decide(ms, now, silence)
		if !slices.Equal(in, []string{"a", "c"}) || len(left) != 1 || left[0] != ms[1] || len(back) != 0 {
			t.Errorf("in %v, left %d, back %d; want a and c in, b left", in, len(left), len(back))
		}
		if in, left, back := decide(ms, now, silence); !slices.Equal(in, []string{"a", "c"}) || len(left)+len(back) != 0 {
			t.Errorf("again: in %v, left %d, back %d; want no change", in, len(left), len(back))
		}
	})
	t.Run("all silent", func(t *testing.T) {
		// No member to send the requests to instead: the client keeps them all.
		in, left, back := decide(members(silent, silent, silent), now, silence)
		if len(in) != 3 || len(left)+len(back) != 0 {
			t.Errorf("in %v, left %d, back %d; want all in, no change", in, len(left), len(back))
		}
	})
	t.Run("two silent", func(t *testing.T) {
		in, left, _ := decide(members(silent, heard, silent), now, silence)
		if !slices.Equal(in, []string{"b"}) || len(left) != 2 {
			t.Errorf("in %v, left %d; want b alone in", in, len(left))
		}
	})
	t.Run("back", func(t *testing.T) {
		ms := members(heard, silent)
		decide(ms, now, silence)
		ms[1].answers, ms[1].heard = readmitAnswers-1, now
		if in, _, back := decide(ms, now, silence); len(in) != 1 || len(back) != 0 {
			t.Errorf("after %d answer: in %v, back %d; want b still out", readmitAnswers-1, in, len(back))
		}
		ms[1].answers = readmitAnswers
		if in, _, back := decide(ms, now, silence); len(in) != 2 || len(back) != 1 {
			t.Errorf("after %d answers: in %v, back %d; want b back", readmitAnswers, in, len(back))
		}
	})
}

func TestEndpointAddr(t *testing.T) {
	for ep, want := range map[string]string{
		"http://127.0.0.1:2379":  "127.0.0.1:2379",
		"https://etcd-0:2379":    "etcd-0:2379",
		"10.0.0.1:2379":          "10.0.0.1:2379",
		"unix:///run/etcd.sock":  "unix:///run/etcd.sock",
		"unix://etcd.sock":       "unix:etcd.sock",
		"unixs://etcd.sock":      "unix:etcd.sock",
		"unix:etcd.sock":         "unix:etcd.sock",
		"unixs:///run/etcd.sock": "unix:///run/etcd.sock",
	} {
		if got := endpointAddr(ep); got != want {
			t.Errorf("endpointAddr(%q) = %q, want %q", ep, got, want)
		}
	}
}

// startEtcd starts an embedded etcd for the test (one that issues authentication tokens if
// users is set: embedetcd.Config.Users) and returns it and its client URL.
func startEtcd(t *testing.T, users bool) (*embedetcd.Etcd, *url.URL) {
	t.Helper()
	e, err := embedetcd.Start(embedetcd.Config{Dir: t.TempDir(), Users: users})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	u, err := url.Parse(e.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	return e, u
}

// startProxy starts a tcpproxy.Proxy to target for the test.
func startProxy(t *testing.T, target string) *tcpproxy.Proxy {
	t.Helper()
	p, err := tcpproxy.Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
