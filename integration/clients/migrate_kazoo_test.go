package clients

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/zetcd/zetcd/internal/testkit/itest"
)

// TestMigrateKazoo: kazoo across a cutover (testdata/kazoo_migrate.py). kazoo's DataWatch (of a
// node and of an absent node) and ChildrenWatch, set before the cutover, are called once for
// each change made after it; the session is the same, its state SUSPENDED then CONNECTED, never
// LOST; its ephemeral is kept; a read after the cutover gives the same data and version and no
// older mzxid than one before, and a write after it a zxid above every zxid seen before.
// DataWatch, which tells a change by the node's mzxid, is not called at the cutover ("calls
// with nothing changed"): zetcd shows ZooKeeper's zxids (docs/migration.md, "Cutover").
func TestMigrateKazoo(t *testing.T) {
	py := kazooPython(t)
	m := itest.StartMigration(t, itest.MigrationOptions{})
	cmd := exec.Command(py, filepath.Join("testdata", "kazoo_migrate.py"), m.Addr)
	client, _ := cutOverClient(t, m, cmd, "kazoo_migrate.py")
	wantLines(t, "kazoo_migrate.py", finish(t, client, "go"), []string{
		"read data=v3 sameVersion=True mzxidNotOlder=True",
		"raw watch at the disconnection ['NONE None']",
		"calls with nothing changed []",
		"ephemeral kept=True",
		"write after zxidAbove=True",
		"calls for setData ['data after']",
		"calls for a create [\"children ['data', 'eph', 'new']\"]",
		"calls for the absent node's create ['absent here', \"children ['absent', 'data', 'eph', 'new']\"]",
		"session same=True",
		"states ['CONNECTED', 'SUSPENDED', 'CONNECTED'] ['CONNECTED', 'SUSPENDED', 'CONNECTED']",
	})
	if t.Failed() {
		t.Logf("kazoo_migrate.py's stderr:\n%s", client.stderr.String())
	}
}
