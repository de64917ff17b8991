package clients

import (
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
)

// TestMigrateJavaClient: ZooKeeper's Java client across a cutover
// (testdata/MigrateJavaClient.java). A data, a child and an exists watch set before the cutover,
// set again by the client's setWatches on zetcd, fire once each for the changes made after it,
// and not for anything before; the session is the same, Disconnected then SyncConnected, never
// Expired; its ephemeral is kept; a read after the cutover gives the same version and no older
// mzxid than one before; a write after it has a zxid above every zxid ZooKeeper gave out. It
// runs against a standalone ZooKeeper, and against a three-server ensemble (the sessions
// relayed to any of its servers; the cutover reads every server's cons).
func TestMigrateJavaClient(t *testing.T) {
	t.Run("standalone", func(t *testing.T) { migrateJavaClient(t, nil) })
	t.Run("ensemble", func(t *testing.T) { migrateJavaClient(t, zkserver.StartEnsemble(t, 3, zkserver.Options{})) })
}

func migrateJavaClient(t *testing.T, ensemble []*zkserver.Server) {
	m := itest.StartMigration(t, itest.MigrationOptions{ZooKeeper: ensemble})
	cmd := javaProgram(t, t.TempDir(), "MigrateJavaClient.java", nil, []string{"-Dzookeeper.sasl.client=false"}, m.Addr)
	client, cs := cutOverClient(t, m, cmd, "java MigrateJavaClient")
	lines := finish(t, client, "go")
	lines = slices.DeleteFunc(lines, func(l string) bool {
		z, ok := strings.CutPrefix(l, "afterWriteZxid ")
		if !ok {
			return false
		}
		after, err1 := strconv.ParseInt(z, 0, 64)
		last, err2 := strconv.ParseInt(cs.ZooKeeperZxid, 0, 64)
		if err1 != nil || err2 != nil || after <= last {
			t.Errorf("a write after the cutover: zxid %s, not above ZooKeeper's last %s", z, cs.ZooKeeperZxid)
		}
		return true
	})
	wantLines(t, "java MigrateJavaClient", lines, []string{
		"read data=v3 sameVersion=true mzxidNotOlder=true",
		"events with nothing changed []",
		"ephemeral kept=true",
		"write after zxidAbove=true",
		"fired [NodeChildrenChanged /jm, NodeCreated /jm/absent, NodeDataChanged /jm/data]",
		"read after the change after",
		"session same=true",
		"states [SyncConnected, Disconnected, SyncConnected] [SyncConnected, Disconnected, SyncConnected]",
	})
	if t.Failed() {
		t.Logf("java MigrateJavaClient's stderr:\n%s", client.stderr.String())
	}
}

// cutOverClient starts cmd, a client program that pauses at "ready SESSION" with its session
// and one writer's relayed through m; cuts over, checks that both sessions were taken over, and
// stops ZooKeeper.
func cutOverClient(t *testing.T, m *itest.Migration, cmd *exec.Cmd, name string) (*pausedClient, itest.CutoverStatus) {
	t.Helper()
	client, ready := startPaused(t, cmd, name)
	session := strings.TrimPrefix(ready, "ready ")
	cs := m.Cutover(t)
	if !slices.Contains(cs.TakenOver, session) || len(cs.TakenOver) != 2 {
		t.Errorf("sessions taken over: %v, want %s's and the writer's", cs.TakenOver, session)
	}
	m.StopZooKeeper()
	return client, cs
}
