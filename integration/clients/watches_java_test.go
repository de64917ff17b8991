package clients

import (
	"slices"
	"strings"
	"testing"

	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// TestJavaClientWatchesMove: ZooKeeper's Java client sets 6,001 watches (data, exists and child
// watches; testdata/ManyWatches.java) on one zetcd, which is then stopped. The client resumes its
// session on another zetcd in front of the same etcd and sends its watches again in several
// setWatches frames (the Java client splits them at 128 KB); another session changes every
// watched node, and each watch fires exactly once.
func TestJavaClientWatchesMove(t *testing.T) {
	cluster := startEtcd(t)
	zs := []*testenv.Zetcd{testenv.StartZetcdOn(t, cluster, testenv.Options{}), testenv.StartZetcdOn(t, cluster, testenv.Options{})}
	addrs := []string{zs[0].Addr, zs[1].Addr}
	cmd := javaProgram(t, t.TempDir(), "ManyWatches.java", nil, []string{"-Dzookeeper.sasl.client=false"}, strings.Join(addrs, ","))
	client, ready := startPaused(t, cmd, "java ManyWatches")
	zs[serverOf(t, strings.TrimPrefix(ready, "ready "), addrs)].Stop()
	lines := slices.DeleteFunc(client.resume(), func(l string) bool { return l == ready })
	wantLines(t, "java ManyWatches", lines, []string{
		"watches set 6001",
		"states [SyncConnected, Disconnected, SyncConnected]",
		"sameSession true",
		"fired 6001 of 6001 duplicates 0",
	})
}
