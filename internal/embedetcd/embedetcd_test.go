package embedetcd

import (
	"os"
	"testing"
)

// TestDirs: Dirs names the snapshot and WAL directories a started etcd has created, and both
// hold files (what the dirs and conf four-letter words measure).
func TestDirs(t *testing.T) {
	dir := t.TempDir()
	e, err := Start(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	snap, wal := Dirs(dir)
	for _, d := range []string{snap, wal} {
		entries, err := os.ReadDir(d)
		if err != nil || len(entries) == 0 {
			t.Errorf("%s: %d entries, %v; want etcd's files", d, len(entries), err)
		}
	}
}
