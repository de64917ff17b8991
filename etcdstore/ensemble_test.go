package etcdstore

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/encoding"
)

func TestCheckAdvertiseAddr(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"10.0.0.5:2181", true},
		{"zk-1.example.com:2181", true},
		{"[2001:db8::1]:2281", true},
		{"0.0.0.0:2181", false},
		{"[::]:2181", false},
		{":2181", false},
		{"10.0.0.5", false},
		{"10.0.0.5:0", false},
		{"10.0.0.5:70000", false},
		{"10.0.0.5:http", false},
	} {
		err := CheckAdvertiseAddr(tc.addr)
		if (err == nil) != tc.ok {
			t.Errorf("CheckAdvertiseAddr(%q) = %v, want ok %v", tc.addr, err, tc.ok)
		}
	}
}

func TestEnsembleFormat(t *testing.T) {
	e := ensemble{"10.0.0.7:2181": 2, "10.0.0.5:2181": 1, "[2001:db8::1]:2181": 3}
	got := string(formatEnsemble(e, 0x1f))
	want := "server.1=10.0.0.5:2888:3888:participant;10.0.0.5:2181\n" +
		"server.2=10.0.0.7:2888:3888:participant;10.0.0.7:2181\n" +
		"server.3=[2001:db8::1]:2888:3888:participant;[2001:db8::1]:2181\n" +
		"version=1f"
	if got != want {
		t.Errorf("formatEnsemble:\n%s\nwant:\n%s", got, want)
	}
	back, version := parseEnsemble([]byte(got))
	if !maps.Equal(back, e) || version != 0x1f {
		t.Errorf("parseEnsemble(formatEnsemble(e)) = %v, %x", back, version)
	}
	if len(formatEnsemble(nil, 3)) != 0 {
		t.Error("an empty list is not empty data")
	}
	// As a ZooKeeper writes it: a client address without a host is left out.
	zk, version := parseEnsemble([]byte("server.1=a:2888:3888:participant;0.0.0.0:2181\nserver.2=b:2888:3888:participant;2181\nversion=100000000"))
	if !maps.Equal(zk, ensemble{"0.0.0.0:2181": 1}) || version != 0x100000000 {
		t.Errorf("ZooKeeper's config parsed as %v, %x", zk, version)
	}
}

// TestEnsembleTracker: an address is listed after being live for the grace and dropped after
// being absent for it; a restart within the grace changes nothing; ids stay and the lowest free
// one goes to a newcomer.
func TestEnsembleTracker(t *testing.T) {
	const grace = 10 * time.Second
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	live := func(addrs ...string) map[string]bool {
		m := map[string]bool{}
		for _, a := range addrs {
			m[a] = true
		}
		return m
	}
	tr := newEnsembleTracker(grace)
	pub := ensemble{}
	step := func(s int, l map[string]bool, want ensemble) {
		t.Helper()
		pub = tr.next(pub, l, at(s))
		if !maps.Equal(pub, want) {
			t.Fatalf("at %ds with %v: %v, want %v", s, l, pub, want)
		}
	}
	step(0, live("a:1", "b:1", "c:1"), ensemble{})
	step(9, live("a:1", "b:1", "c:1"), ensemble{})
	step(10, live("a:1", "b:1", "c:1"), ensemble{"a:1": 1, "b:1": 2, "c:1": 3})
	// b restarts within the grace: nothing changes.
	step(11, live("a:1", "c:1"), ensemble{"a:1": 1, "b:1": 2, "c:1": 3})
	step(15, live("a:1", "b:1", "c:1"), ensemble{"a:1": 1, "b:1": 2, "c:1": 3})
	// a leaves for good; d arrives, and gets a's id once a is dropped.
	step(20, live("b:1", "c:1", "d:1"), ensemble{"a:1": 1, "b:1": 2, "c:1": 3})
	step(29, live("b:1", "c:1", "d:1"), ensemble{"a:1": 1, "b:1": 2, "c:1": 3})
	step(30, live("b:1", "c:1", "d:1"), ensemble{"b:1": 2, "c:1": 3, "d:1": 1})
	// A process live for less than the grace is never listed.
	step(31, live("b:1", "c:1", "d:1", "e:1"), ensemble{"b:1": 2, "c:1": 3, "d:1": 1})
	step(35, live("b:1", "c:1", "d:1"), ensemble{"b:1": 2, "c:1": 3, "d:1": 1})
	step(50, live("b:1", "c:1", "d:1"), ensemble{"b:1": 2, "c:1": 3, "d:1": 1})
}

// TestEnsemblePublished: three processes on one etcd, one publishing leader: /zookeeper/config
// lists the three after the grace, then two when one closes, its version and Stat moving with
// each change only; a leader that does not publish empties it.
func TestEnsemblePublished(t *testing.T) {
	cli := startEtcd(t)
	ctx := context.Background()
	const grace = 300 * time.Millisecond
	start := func(addr string, publish bool) *Store {
		b, err := New(ctx, Config{Client: cli, Logger: zaptest.NewLogger(t), ReapInterval: time.Hour,
			AdvertiseClientAddrs: []string{addr, "10.9.9.9:2281"}, PublishEnsemble: publish, EnsembleGrace: grace})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		return b
	}
	bs := []*Store{start("10.0.0.1:2181", true), start("10.0.0.2:2181", true), start("10.0.0.3:2181", true)}
	// Read through the process that neither leads nor leaves (the first until they are known).
	s := openTestSession(t, bs[0])
	config := func() *encoding.GetDataResponse {
		t.Helper()
		r, _, err := s.GetData(ctx, &encoding.GetDataRequest{Path: "/zookeeper/config"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// The first process may be elected and publish alone before the others start: the
	// version counts the lists published, as the node's version does.
	three := "server.1=10.0.0.1:2888:3888:participant;10.0.0.1:2181\n" +
		"server.2=10.0.0.2:2888:3888:participant;10.0.0.2:2181\n" +
		"server.3=10.0.0.3:2888:3888:participant;10.0.0.3:2181\n"
	waitUntil(t, "three servers listed", func() bool { return strings.HasPrefix(string(config().Data), three) })
	first := config()
	if _, v := parseEnsemble(first.Data); int64(v) != int64(first.Stat.Version) || first.Stat.Aversion != -1 {
		t.Errorf("config %q with Stat %+v", first.Data, first.Stat)
	}
	time.Sleep(3 * grace)
	if again := config().Stat; again != first.Stat {
		t.Errorf("the node changed with the set unchanged: %+v, was %+v", again, first.Stat)
	}
	leader := -1
	for i, b := range bs {
		if b.reaper.leader.Load() {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no leader")
	}
	gone, survivor := (leader+1)%3, (leader+2)%3
	s = openTestSession(t, bs[survivor])
	bs[gone].Close()
	waitUntil(t, "two servers listed", func() bool { return !strings.Contains(string(config().Data), bs[gone].advertise[0]) })
	second := config()
	if e, v := parseEnsemble(second.Data); len(e) != 2 || int64(v) != int64(second.Stat.Version) ||
		second.Stat.Version != first.Stat.Version+1 || second.Stat.Mzxid <= first.Stat.Mzxid || second.Stat.Czxid != first.Stat.Czxid {
		t.Errorf("config %q with Stat %+v after a process left; before %+v", second.Data, second.Stat, first.Stat)
	}

	// The leader goes; the next one does not publish: it empties the node.
	bs[survivor].publishEnsemble.Store(false)
	bs[leader].Close()
	waitUntil(t, "the node emptied", func() bool { return len(config().Data) == 0 })
	if st := config().Stat; st.Version != second.Stat.Version+1 {
		t.Errorf("Stat once emptied: %+v", st)
	}
	if r, err := cli.Get(ctx, bs[survivor].keys.ensemble()); err != nil || len(r.Kvs) != 0 {
		t.Errorf("ensemble key after emptying: %v, %v", r, err)
	}
}

// TestEnsembleNotPublished: processes that advertise addresses without PublishEnsemble leave
// /zookeeper/config empty, with its Stat untouched.
func TestEnsembleNotPublished(t *testing.T) {
	cli := startEtcd(t)
	ctx := context.Background()
	var bs []*Store
	for _, a := range []string{"10.0.0.1:2181", "10.0.0.2:2181"} {
		b, err := New(ctx, Config{Client: cli, Logger: zaptest.NewLogger(t), ReapInterval: time.Hour,
			AdvertiseClientAddrs: []string{a}, EnsembleGrace: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		bs = append(bs, b)
	}
	waitUntil(t, "a leader", func() bool { return bs[0].reaper.leader.Load() || bs[1].reaper.leader.Load() })
	time.Sleep(time.Second)
	r, err := cli.Get(ctx, bs[0].keys.data("/zookeeper/config"))
	if err != nil || len(r.Kvs) != 1 {
		t.Fatal(r, err)
	}
	if data, _, _, _, err := decodeDataValue(r.Kvs[0].Value); err != nil || len(data) != 0 || r.Kvs[0].Version != 1 {
		t.Errorf("/zookeeper/config: %q (version %d), %v", data, r.Kvs[0].Version, err)
	}
	procs, err := cli.Get(ctx, bs[0].keys.processKeysPrefix(), clientv3.WithPrefix())
	if err != nil || len(procs.Kvs) != 2 {
		t.Fatal(procs, err)
	}
	for _, kv := range procs.Kvs {
		if a := decodeProcessValue(kv.Value); len(a) != 1 || !strings.HasPrefix(a[0], "10.0.0.") {
			t.Errorf("process key %s advertises %v", kv.Key, a)
		}
	}
	if _, err := New(ctx, Config{Client: cli, AdvertiseClientAddrs: []string{"0.0.0.0:2181"}}); err == nil ||
		!strings.Contains(err.Error(), "wildcard") {
		t.Errorf("a wildcard address advertised: %v", err)
	}
}
