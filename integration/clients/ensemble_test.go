package clients

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// ensembleGrace is --publish-ensemble-grace in these tests.
const ensembleGrace = 2 * time.Second

// startEnsemble runs n zetcd processes on one etcd, each advertising its own address, with
// --publish-ensemble if publish, and returns them.
func startEnsemble(t *testing.T, endpoint string, n int, publish bool) []*itest.ZetcdProcess {
	t.Helper()
	var ps []*itest.ZetcdProcess
	for range n {
		ps = append(ps, startAdvertising(t, endpoint, publish))
	}
	return ps
}

func startAdvertising(t *testing.T, endpoint string, publish bool) *itest.ZetcdProcess {
	t.Helper()
	addr := itest.FreePort(t)
	args := []string{"--endpoints", endpoint, "--advertise-client-addr", addr, "--publish-ensemble-grace", ensembleGrace.String()}
	if publish {
		args = append(args, "--publish-ensemble")
	}
	p := itest.StartProcessArgs(t, addr, args...)
	p.LogOnFailure(t, addr)
	return p
}

// waitListed waits until /zookeeper/config, read through addr, names every address of ps.
func waitListed(t *testing.T, addr string, ps ...*itest.ZetcdProcess) {
	t.Helper()
	c := testenv.Connect(t, addr)
	defer c.Close()
	testenv.Eventually(t, ensembleGrace+20*time.Second, "/zookeeper/config listing the zetcds", func() error {
		data, _, err := c.Get("/zookeeper/config")
		if err != nil {
			return err
		}
		for _, p := range ps {
			if !strings.Contains(string(data), ";"+p.Addr+"\n") {
				return fmt.Errorf("%s not in %q", p.Addr, data)
			}
		}
		return nil
	})
}

// TestCuratorEnsembleTracker: Curator, started with the address of one of three zetcd processes
// that publish the ensemble, learns the other two from /zookeeper/config (its EnsembleTracker),
// keeps its session when the first is stopped, and learns a fourth started later while it
// forgets the first.
func TestCuratorEnsembleTracker(t *testing.T) {
	lib := curatorLib(t)
	endpoint := startEtcd(t).Etcd.Endpoint
	ps := startEnsemble(t, endpoint, 3, true)
	waitListed(t, ps[1].Addr, ps...)
	cmd := javaProgram(t, t.TempDir(), "CuratorEnsemble.java", []string{lib}, nil, ps[0].Addr, "published", "0")
	client, ready := startPaused(t, cmd, "java CuratorEnsemble published")
	// The client may have moved to a server it learned (ZooKeeper's updateServerList balances).
	addrs := []string{ps[0].Addr, ps[1].Addr, ps[2].Addr}
	t.Logf("session %s on %s; stopping %s", ready, addrs[serverOf(t, strings.TrimPrefix(ready, "ready "), addrs)], addrs[0])
	ps[0].Stop(t)
	client.proceed()
	fourth := startAdvertising(t, endpoint, true)
	if _, err := io.WriteString(client.stdin, fourth.Addr+"\n"); err != nil {
		t.Fatal(err)
	}
	for client.out.Scan() {
		client.lines = append(client.lines, client.out.Text())
	}
	if err := client.cmd.Wait(); err != nil {
		t.Fatalf("java CuratorEnsemble: %v: %q\nstderr:\n%s", err, client.lines, client.stderr.String())
	}
	lines := slices.DeleteFunc(client.lines, func(l string) bool { return strings.HasPrefix(l, "ready") })
	wantLines(t, "java CuratorEnsemble published", lines, []string{
		"published learned=3 includesFirst=true",
		"published afterStop data=1 sameSession=true",
		"published learnedNew=true forgotFirst=true servers=3 sameSession=true",
	})
}

// TestCuratorEnsembleUnpublished: without --publish-ensemble Curator keeps the connect string it
// was started with, and /zookeeper/config is empty, as on a standalone ZooKeeper.
func TestCuratorEnsembleUnpublished(t *testing.T) {
	lib := curatorLib(t)
	endpoint := startEtcd(t).Etcd.Endpoint
	ps := startEnsemble(t, endpoint, 3, false)
	wait := (ensembleGrace + 2*time.Second) / time.Second
	cmd := javaProgram(t, t.TempDir(), "CuratorEnsemble.java", []string{lib}, nil, ps[0].Addr, "unpublished", strconv.Itoa(int(wait)))
	wantLines(t, "java CuratorEnsemble unpublished", outputLines(t, cmd, "java CuratorEnsemble unpublished"),
		[]string{"unpublished connectString=unchanged config=0B"})
}

// TestZkCliConfigEnsemble: zkCli's `config -c` (ZooKeeper's own parser of the dynamic config,
// ConfigUtils.getClientConfigStr) reads the published list as its version and the three
// processes' client addresses.
func TestZkCliConfigEnsemble(t *testing.T) {
	endpoint := startEtcd(t).Etcd.Endpoint
	ps := startEnsemble(t, endpoint, 3, true)
	waitListed(t, ps[0].Addr, ps...)
	lines := runZkCli(t, ps[0].Addr, "config -c\nquit\n", nil)
	var got []string
	for _, l := range lines {
		if version, addrs, ok := strings.Cut(l, " "); ok && strings.Contains(addrs, ps[0].Addr) {
			if _, err := strconv.ParseUint(version, 16, 64); err != nil {
				t.Errorf("version %q in %q", version, l)
			}
			got = strings.Split(addrs, ",")
		}
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values([]string{ps[0].Addr, ps[1].Addr, ps[2].Addr}))
	if !slices.Equal(got, want) {
		t.Errorf("zkCli config -c: servers %v, want %v; output:\n%s", got, want, strings.Join(lines, "\n"))
	}
}
