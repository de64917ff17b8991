package integration

import (
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/itest"
)

// ensembleGrace is --publish-ensemble-grace in these tests: longer than a zetcd process takes
// to start again, so that a restart within it changes nothing.
const ensembleGrace = 3 * time.Second

// startAdvertising runs a zetcd process on etcd endpoint that advertises its own address.
func startAdvertising(t *testing.T, endpoint, addr string, publish bool) *itest.ZetcdProcess {
	t.Helper()
	args := []string{"--endpoints", endpoint, "--advertise-client-addr", addr, "--publish-ensemble-grace", ensembleGrace.String()}
	if publish {
		args = append(args, "--publish-ensemble")
	}
	p := itest.StartProcessArgs(t, addr, args...)
	p.LogOnFailure(t, addr)
	return p
}

// configServers reads /zookeeper/config's client addresses, sorted, its version line and Stat.
func configServers(t *testing.T, c *zk.Conn) ([]string, uint64, *zk.Stat) {
	t.Helper()
	data, st, err := c.Get("/zookeeper/config")
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	var version uint64
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "version="); ok {
			version, _ = strconv.ParseUint(v, 16, 64)
		} else if _, client, ok := strings.Cut(line, ";"); ok {
			addrs = append(addrs, client)
			if !strings.HasPrefix(line, "server.") || !strings.Contains(line, ":2888:3888:participant;") {
				t.Errorf("server line %q", line)
			}
		}
	}
	slices.Sort(addrs)
	return addrs, version, st
}

func sorted(s ...string) []string { return slices.Sorted(slices.Values(s)) }

// waitConfig waits until /zookeeper/config lists exactly want and returns its version and Stat.
func waitConfig(t *testing.T, c *zk.Conn, want []string) (uint64, *zk.Stat) {
	t.Helper()
	deadline := time.Now().Add(ensembleGrace + 20*time.Second)
	for {
		got, version, st := configServers(t, c)
		if slices.Equal(got, want) {
			if uint64(st.Version) != version {
				t.Errorf("config version %x, node version %d: they move together", version, st.Version)
			}
			return version, st
		}
		if time.Now().After(deadline) {
			t.Fatalf("/zookeeper/config lists %v, want %v", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// wantConfigEvent waits for the watch armed on /zookeeper/config to fire NodeDataChanged, not
// before the grace since the change at changed.
func wantConfigEvent(t *testing.T, ev <-chan zk.Event, changed time.Time) {
	t.Helper()
	select {
	case e := <-ev:
		if e.Type != zk.EventNodeDataChanged || e.Path != "/zookeeper/config" {
			t.Fatalf("event %+v, want NodeDataChanged on /zookeeper/config", e)
		}
		if waited := time.Since(changed); waited < ensembleGrace {
			t.Errorf("NodeDataChanged %v after the change, before the grace (%v)", waited, ensembleGrace)
		}
	case <-time.After(ensembleGrace + 20*time.Second):
		t.Fatal("no NodeDataChanged on /zookeeper/config")
	}
}

// TestEnsemblePublished: three zetcd processes on one etcd with --publish-ensemble. An
// observer, on a fourth process that advertises nothing and is never elected, sees
// /zookeeper/config list the three; a process that stops is dropped and one that starts is
// listed, each after the grace, with the node's version and its watch's NodeDataChanged; a
// process restarted within the grace changes nothing.
func TestEnsemblePublished(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the zetcd binary")
	}
	endpoint := startEtcd(t).Etcd.Endpoint
	a, b, c := itest.FreePort(t), itest.FreePort(t), itest.FreePort(t)
	startAdvertising(t, endpoint, a, true)
	pb := startAdvertising(t, endpoint, b, true)
	pc := startAdvertising(t, endpoint, c, true)
	obsAddr := itest.FreePort(t)
	itest.StartProcessArgs(t, obsAddr, "--endpoints", endpoint, "--reap-interval", "0")
	obs := connect(t, obsAddr)

	v1, st1 := waitConfig(t, obs, sorted(a, b, c))

	// b restarts within the grace: the node does not move.
	pb.Stop(t)
	startAdvertising(t, endpoint, b, true)
	time.Sleep(ensembleGrace + 2*time.Second)
	if got, v, st := configServers(t, obs); !slices.Equal(got, sorted(a, b, c)) || v != v1 || st.Mzxid != st1.Mzxid {
		t.Fatalf("after a restart within the grace: %v version %x mzxid %x; was version %x mzxid %x", got, v, st.Mzxid, v1, st1.Mzxid)
	}

	// c stops: dropped after the grace.
	_, _, ev, err := obs.GetW("/zookeeper/config")
	if err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	pc.Stop(t)
	wantConfigEvent(t, ev, stopped)
	v2, st2 := waitConfig(t, obs, sorted(a, b))
	if v2 != v1+1 || st2.Mzxid <= st1.Mzxid || st2.Czxid != st1.Czxid {
		t.Errorf("after c left: version %x (was %x), Stat %+v (was %+v)", v2, v1, st2, st1)
	}

	// d starts: listed after the grace.
	_, _, ev, err = obs.GetW("/zookeeper/config")
	if err != nil {
		t.Fatal(err)
	}
	d := itest.FreePort(t)
	started := time.Now()
	startAdvertising(t, endpoint, d, true)
	wantConfigEvent(t, ev, started)
	if v3, _ := waitConfig(t, obs, sorted(a, b, d)); v3 != v2+1 {
		t.Errorf("after d joined: version %x, was %x", v3, v2)
	}
}

// TestEnsembleNotPublished: processes that advertise addresses without --publish-ensemble leave
// /zookeeper/config as a standalone ZooKeeper has it: empty, never changed.
func TestEnsembleNotPublished(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the zetcd binary")
	}
	endpoint := startEtcd(t).Etcd.Endpoint
	var addrs []string
	for range 3 {
		addr := itest.FreePort(t)
		startAdvertising(t, endpoint, addr, false)
		addrs = append(addrs, addr)
	}
	obs := connect(t, addrs[0])
	time.Sleep(ensembleGrace + 2*time.Second)
	data, st, err := obs.Get("/zookeeper/config")
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 0 || st.Version != 0 || st.Mzxid != st.Czxid {
		t.Errorf("/zookeeper/config without --publish-ensemble: %q, %+v", data, st)
	}
}

// TestEnsembleWildcardRefused: a process that advertises a wildcard address does not start.
func TestEnsembleWildcardRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the zetcd binary")
	}
	bin, err := itest.BuildZetcd()
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"0.0.0.0:2181", "[::]:2181", ":2181"} {
		out, err := exec.Command(bin, "--zkaddr", itest.FreePort(t), "--data-dir", t.TempDir(), "--advertise-client-addr", addr).CombinedOutput()
		if err == nil || !strings.Contains(string(out), fmt.Sprintf("%q", addr)) {
			t.Errorf("--advertise-client-addr %s: %v\n%s", addr, err, out)
		}
	}
}
