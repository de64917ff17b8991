package clients

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// Apache Curator 5.7's recipes (testdata/CuratorRecipes.java, launched from source with Curator's
// jars and ZooKeeper 3.9's client) against zetcd, xchk and ZooKeeper: locks, leader latches,
// queues, caches, persistent recursive watches, counters, barriers, semaphores and transactions,
// each step's outcome as a user of the recipe relies on it, the same lines from every server.
// Curator's caches re-arm a watch with every read, so a watch the Java client dropped (an event
// sent before the reply that set it) stalls a step until it fails.

// envCuratorLib names a directory of Curator's jars; default <module root>/.cache/curator/lib
// (`make curator`).
const envCuratorLib = "ZETCD_CURATOR_LIB"

func curatorLib(t *testing.T) string {
	return jarDir(t, envCuratorLib, "curator", "curator-recipes-*.jar")
}

// curatorWant is what CuratorRecipes.java prints in its "recipes" mode when every recipe works.
var curatorWant = []string{
	"mutex count=80 version=80 maxHolders=1 lockNodesLeft=0",
	"leaderLatch led=[p0, p1, p2] mostAtOnce=1",
	"queue taken=60 distinct=60 eachInOrder=true left=0",
	"curatorCache NODE_CREATED /recipes/cache=root",
	"curatorCache initialized",
	"curatorCache NODE_CREATED /recipes/cache/a=1",
	"curatorCache NODE_CHANGED /recipes/cache/a=2",
	"curatorCache NODE_CREATED /recipes/cache/a/b=3",
	"curatorCache NODE_DELETED /recipes/cache/a/b",
	"curatorCache NODE_DELETED /recipes/cache/a",
	"curatorCache size=1",
	"persistentRecursiveWatch NodeCreated /recipes/pw/x",
	"persistentRecursiveWatch NodeDataChanged /recipes/pw/x",
	"persistentRecursiveWatch NodeCreated /recipes/pw/x/y",
	"persistentRecursiveWatch NodeDeleted /recipes/pw/x/y",
	"persistentRecursiveWatch NodeDeleted /recipes/pw/x",
	"treeCacheEphemeral NODE_ADDED /recipes/members",
	"treeCacheEphemeral INITIALIZED",
	"treeCacheEphemeral NODE_ADDED /recipes/members/m1",
	"treeCacheEphemeral NODE_REMOVED /recipes/members/m1",
	"counters sharedCount=100 atomicLong=100",
	"barrier passed=3 passedEarly=0 left=0",
	"semaphore acquired=25 atMostTwo=true",
	"transaction failing: BADVERSION a=false data=v0",
	"transaction holding: CREATE:/recipes/txn/s-:/recipes/txn/s-0000000000:0 SET_DATA:/recipes/txn:null:0 CHECK:/recipes/txn:null:0",
}

// TestCuratorRecipes runs every recipe against zetcd, xchk and ZooKeeper, each started fresh.
func TestCuratorRecipes(t *testing.T) {
	lib := curatorLib(t)
	onEveryServer(t, "java CuratorRecipes", curatorWant, func(t *testing.T, addr string) []string {
		cmd := javaProgram(t, t.TempDir(), "CuratorRecipes.java", []string{lib}, nil, addr, "recipes")
		return outputLines(t, cmd, "java CuratorRecipes")
	})
}

// TestCuratorSessionMoves: a Curator session holding a lock, a leader latch and a cache on one
// zetcd loses that zetcd (stopped: its connections closed) and resumes on another in front of the
// same etcd; the lock is still its own (its ephemeral node kept), the latch leads again, and the
// cache (a persistent recursive watch) and a one-time exists watch, both set again by the client
// where it resumes, see the changes made after the move.
func TestCuratorSessionMoves(t *testing.T) {
	lib := curatorLib(t)
	cluster := startEtcd(t)
	zs := []*testenv.Zetcd{testenv.StartZetcdOn(t, cluster, testenv.Options{}), testenv.StartZetcdOn(t, cluster, testenv.Options{})}
	curatorMove(t, lib, []string{zs[0].Addr, zs[1].Addr}, func(i int) { zs[i].Stop() })
}

// TestFaultCuratorZetcdKilled is TestCuratorSessionMoves with zetcd processes in front of a
// three-member etcd cluster, and the one the session is on killed (SIGKILL).
func TestFaultCuratorZetcdKilled(t *testing.T) {
	lib := curatorLib(t)
	ms := itest.FaultCluster(t)
	ps := []*itest.ZetcdProcess{itest.ZetcdOn(t, ms), itest.ZetcdOn(t, ms)}
	curatorMove(t, lib, []string{ps[0].Addr, ps[1].Addr}, func(i int) { ps[i].Kill() })
}

// TestFaultCuratorMutexZetcdKilled: four Curator sessions, spread over two zetcd processes in
// front of a three-member etcd, take turns on an InterProcessMutex; one zetcd is killed (SIGKILL)
// while they do. Its sessions resume on the other, none is lost, and no two sessions ever hold
// the mutex at once.
func TestFaultCuratorMutexZetcdKilled(t *testing.T) {
	lib := curatorLib(t)
	ms := itest.FaultCluster(t)
	ps := []*itest.ZetcdProcess{itest.ZetcdOn(t, ms), itest.ZetcdOn(t, ms)}
	addrs := []string{ps[0].Addr, ps[1].Addr}
	cmd := javaProgram(t, t.TempDir(), "CuratorRecipes.java", []string{lib}, nil, strings.Join(addrs, ","), "contend")
	client, ready := startPaused(t, cmd, "java CuratorRecipes contend")
	ps[serverOf(t, strings.TrimPrefix(ready, "ready "), addrs)].Kill()
	var resumedAt string
	lines := slices.DeleteFunc(client.resume(), func(l string) bool {
		if s, ok := strings.CutPrefix(l, "resumed at turn "); ok {
			resumedAt = s
			return true
		}
		return l == ready
	})
	wantLines(t, "java CuratorRecipes contend", lines, []string{"contend turns>=600 true maxHolders=1 sessionsKept=true lockNodesLeft=0"})
	// The sessions were still taking turns when the zetcd was killed.
	if n, err := strconv.Atoi(resumedAt); err != nil || n >= 600 {
		t.Errorf("the program went on at turn %q: the kill did not fall inside the contention", resumedAt)
	}
	t.Logf("the zetcd was killed before turn %s of 600", resumedAt)
}

// curatorMove runs CuratorRecipes.java's "move" mode on the zetcds at addrs; lose(i) takes away
// the i-th, the one the session is on, while the program waits.
func curatorMove(t *testing.T, lib string, addrs []string, lose func(i int)) {
	t.Helper()
	cmd := javaProgram(t, t.TempDir(), "CuratorRecipes.java", []string{lib}, nil, strings.Join(addrs, ","), "move")
	client, ready := startPaused(t, cmd, "java CuratorRecipes move")
	session := strings.TrimPrefix(ready, "ready ")
	i := serverOf(t, session, addrs)
	t.Logf("session %s was on %s", session, addrs[i])
	lose(i)
	lines := slices.DeleteFunc(client.resume(), func(l string) bool { return l == ready })
	want := []string{
		"move NODE_CREATED /move/cache=0",
		"move NODE_CHANGED /move/cache=1",
		"move NODE_CREATED /move/cache/after=2",
		"move NodeCreated /move/w",
		"move sameSession=true states=[SUSPENDED, RECONNECTED] lockHeld=true lockNodes=1 leader=true",
		"move lockNodesAfterRelease=0",
	}
	wantLines(t, "java CuratorRecipes move", lines, want)
}
