package clients

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zetcd/zetcd/internal/testkit/itest"
)

// The tests named Migrat* run real clients connected to a zetcd in migration mode (relayed to a
// real ZooKeeper) across the cutover (docs/migration.md, "Cutover"), ZooKeeper stopped after
// it: each client keeps its session, ephemerals, watches and recipes.

// TestMigrateCurator: Curator's recipes across a cutover (testdata/MigrateCurator.java). A
// mutex holder keeps its lock node while a second session contends for it throughout and never
// gets it; a LeaderLatch leader never stops leading and the other participant never leads; a
// CuratorCache sees every change made before, during (a writer creating nodes one after another
// while the cutover runs) and after the cutover once, in order; each session is the same, seen
// through SUSPENDED and RECONNECTED, never LOST. A TreeCache of nodes that nothing changes,
// which tells a change by a node's mzxid, publishes nothing at the cutover: zetcd shows
// ZooKeeper's zxids (docs/migration.md, "Cutover").
func TestMigrateCurator(t *testing.T) {
	lib := curatorLib(t)
	m := itest.StartMigration(t, itest.MigrationOptions{})
	cmd := javaProgram(t, t.TempDir(), "MigrateCurator.java", []string{lib}, nil, m.Addr)
	client, ready := startPaused(t, cmd, "java MigrateCurator")
	holder := strings.TrimPrefix(ready, "ready ")
	start := time.Now()
	cs := m.Cutover(t)
	end := time.Now()
	t.Logf("cutover in %v: %+v", end.Sub(start), cs)
	if !slices.Contains(cs.TakenOver, holder) || len(cs.TakenOver) != 4 {
		t.Errorf("sessions taken over: %v, want the holder %s's and three more", cs.TakenOver, holder)
	}
	m.StopZooKeeper()
	lines := finish(t, client, fmt.Sprintf("go %d %d", start.UnixMilli(), end.UnixMilli()))
	states := "[CONNECTED, SUSPENDED, RECONNECTED]"
	wantLines(t, "java MigrateCurator", lines, []string{
		"curatorCache everyChangeOncePerNodeInOrder=true",
		"writer before=true during=true after=true",
		"treeCache with nothing changed []",
		"mutex held=true lockNodes=1 sameNode=true contenderGot=false",
		"leaderLatch leader=true everLost=false otherLed=false",
		"sessions same=true",
		fmt.Sprintf("states {holder=%s, contender=%s, cache=%s, writer=%s}", states, states, states, states),
		"afterRelease contenderGot=true leader=true",
	})
	if t.Failed() {
		t.Logf("java MigrateCurator's stderr:\n%s", client.stderr.String())
	}
}

// finish lets a paused client program go on with the line goLine, waits for it to end, and
// returns the lines it printed after its last ready line, less its "info" lines, which the test
// logs; the test fails if the program fails.
func finish(t *testing.T, p *pausedClient, goLine string) []string {
	t.Helper()
	if _, err := io.WriteString(p.stdin, goLine+"\n"); err != nil {
		t.Fatal(err)
	}
	from := len(p.lines)
	for p.out.Scan() {
		p.lines = append(p.lines, p.out.Text())
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("%s: %v: %q\nstderr:\n%s", p.what, err, p.lines, p.stderr.String())
	}
	return slices.DeleteFunc(slices.Clone(p.lines[from:]), func(l string) bool {
		if strings.HasPrefix(l, "info ") {
			t.Log(l)
			return true
		}
		return false
	})
}
