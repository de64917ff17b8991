package zkdata_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
	"github.com/zetcd/zetcd/internal/zkdata"
)

// realDataDir runs a short history on a real ZooKeeper with frequent snapshots, kills it and
// returns its data directory and the tree a client read before the kill.
func realDataDir(t *testing.T) (string, map[string]clientNode) {
	t.Helper()
	srv := zkserver.Start(t, zkserver.Options{ConfigLines: []string{"snapCount=20"}, SystemProps: serverProps("")})
	c := connect(t, srv.Addr, sessionTimeout)
	_, err := c.Create("/d", nil, 0, open)
	testenv.Must(t, err)
	for i := range 150 {
		p := fmt.Sprintf("/d/n%d", i%10)
		if _, err := c.Create(p, []byte("x"), 0, open); err != nil {
			_, err = c.Set(p, []byte(fmt.Sprint(i)), -1)
			testenv.Must(t, err)
		}
		if i%4 == 0 {
			testenv.Must(t, c.Delete(p, -1))
		}
	}
	truth := readTree(t, c)
	srv.Stop()
	return filepath.Join(srv.Dir, "data"), truth
}

// dataFiles lists a data directory's snapshots and logs, oldest first.
func dataFiles(t *testing.T, dir string) (snaps, logs []string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "version-2"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		p := filepath.Join(dir, "version-2", e.Name())
		switch {
		case strings.HasPrefix(e.Name(), "snapshot."):
			snaps = append(snaps, p)
		case strings.HasPrefix(e.Name(), "log."):
			logs = append(logs, p)
		}
	}
	byZxid := func(a, b string) int {
		return int(zxidOf(t, a) - zxidOf(t, b))
	}
	slices.SortFunc(snaps, byZxid)
	slices.SortFunc(logs, byZxid)
	return snaps, logs
}

func zxidOf(t *testing.T, path string) int64 {
	var z int64
	if _, err := fmt.Sscanf(strings.Split(filepath.Base(path), ".")[1], "%x", &z); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return z
}

// logEntry is where an entry of a log lies.
type logEntry struct{ off, length int64 }

// logEntries parses a log's entries up to its zero tail.
func logEntries(t *testing.T, path string) []logEntry {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var es []logEntry
	for off := int64(16); off+12 <= int64(len(b)); {
		n := int64(binary.BigEndian.Uint32(b[off+8:]))
		if n == 0 {
			break
		}
		es = append(es, logEntry{off, n})
		off += 12 + n + 1
	}
	return es
}

func patch(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		testenv.Must(t, os.Remove(p))
	}
}

// inCopy returns the path in the copy dst of a file of src.
func inCopy(src, dst, path string) string {
	rel, _ := filepath.Rel(src, path)
	return filepath.Join(dst, rel)
}

func wantError(t *testing.T, dir string, parts ...string) {
	t.Helper()
	_, err := zkdata.Load(dir, zkdata.Options{})
	if err == nil {
		t.Fatalf("Load succeeded, want an error with %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("Load: %v; want it to say %q", err, p)
		}
	}
	t.Logf("Load: %v", err)
}

// TestDamage loads damaged copies of a real data directory.
func TestDamage(t *testing.T) {
	src, truth := realDataDir(t)
	snaps, logs := dataFiles(t, src)
	if len(snaps) < 5 || len(logs) < 3 {
		t.Fatalf("want several snapshots and logs, have %d and %d", len(snaps), len(logs))
	}
	lastLog := logs[len(logs)-1]
	es := logEntries(t, lastLog)
	if len(es) == 0 {
		t.Fatalf("%s: no entries", lastLog)
	}
	// The middle entry of the longest log, which a load from snapshot.0 replays.
	bigLog, bigEntries := "", []logEntry(nil)
	for _, l := range logs {
		if e := logEntries(t, l); len(e) > len(bigEntries) {
			bigLog, bigEntries = l, e
		}
	}
	mid := bigEntries[len(bigEntries)/2]
	// fromFirst makes a copy of the directory whose only snapshot is snapshot.0.
	fromFirst := func(t *testing.T) string {
		dst := copyDir(t, src)
		for _, s := range snaps[1:] {
			remove(t, inCopy(src, dst, s))
		}
		return dst
	}

	t.Run("not a data directory", func(t *testing.T) {
		wantError(t, t.TempDir(), "not a ZooKeeper data directory")
		empty := t.TempDir()
		testenv.Must(t, os.Mkdir(filepath.Join(empty, "version-2"), 0o755))
		wantError(t, empty, "not a ZooKeeper data directory")
	})
	t.Run("log checksum", func(t *testing.T) {
		dst := fromFirst(t)
		patch(t, inCopy(src, dst, bigLog), mid.off+12+mid.length/2, []byte{0xA5})
		wantError(t, dst, filepath.Base(bigLog), fmt.Sprintf("offset %d", mid.off), "checksum")
	})
	t.Run("log magic", func(t *testing.T) {
		dst := fromFirst(t)
		patch(t, inCopy(src, dst, bigLog), 0, []byte("XXXX"))
		wantError(t, dst, filepath.Base(bigLog), "offset 0", "magic")
	})
	t.Run("torn entry in the middle", func(t *testing.T) {
		dst := fromFirst(t)
		patch(t, inCopy(src, dst, bigLog), mid.off+12+mid.length, []byte{0}) // its end-of-record byte
		wantError(t, dst, filepath.Base(bigLog), fmt.Sprintf("offset %d", mid.off), "followed by data")
	})
	t.Run("empty entry in the middle", func(t *testing.T) {
		dst := fromFirst(t)
		patch(t, inCopy(src, dst, bigLog), mid.off, make([]byte, 12))
		wantError(t, dst, filepath.Base(bigLog), fmt.Sprintf("offset %d", mid.off), "followed by data")
	})
	t.Run("gap between logs", func(t *testing.T) {
		dst := fromFirst(t)
		remove(t, inCopy(src, dst, logs[1]))
		wantError(t, dst, filepath.Base(logs[2]), "offset 16", "transactions are missing")
	})
	t.Run("gap after the snapshot", func(t *testing.T) {
		dst := copyDir(t, src)
		keep := snaps[len(snaps)/2]
		for _, s := range snaps {
			if s != keep {
				remove(t, inCopy(src, dst, s))
			}
		}
		var next string
		for _, l := range logs {
			if zxidOf(t, l) <= zxidOf(t, keep) {
				remove(t, inCopy(src, dst, l))
			} else if next == "" {
				next = l
			}
		}
		if next == "" || zxidOf(t, next) == zxidOf(t, keep)+1 {
			t.Skipf("no log starts past %s", keep)
		}
		wantError(t, dst, filepath.Base(next), "offset 16", "after the snapshot's zxid")
	})
	t.Run("damaged snapshots are skipped", func(t *testing.T) {
		dst := copyDir(t, src)
		newest := inCopy(src, dst, snaps[len(snaps)-1])
		fi, err := os.Stat(newest)
		testenv.Must(t, err)
		patch(t, newest, fi.Size()/2, []byte{0xA5, 0x5A})
		second := inCopy(src, dst, snaps[len(snaps)-2])
		fi, err = os.Stat(second)
		testenv.Must(t, err)
		testenv.Must(t, os.Truncate(second, fi.Size()-3))
		// The third has its first seal changed: the nodes' checksum, 67 bytes from the end of
		// a 3.9 snapshot (seal, digest, seal, last zxid, seal).
		third := inCopy(src, dst, snaps[len(snaps)-3])
		fi, err = os.Stat(third)
		testenv.Must(t, err)
		patch(t, third, fi.Size()-67+7, []byte{0xA5})
		st, err := zkdata.Load(dst, zkdata.Options{})
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if want := inCopy(src, dst, snaps[len(snaps)-4]); st.Snapshot != want {
			t.Errorf("Snapshot = %s, want %s", st.Snapshot, want)
		}
		if len(st.Skipped) != 3 || !strings.Contains(st.Skipped[0], filepath.Base(newest)) || !strings.Contains(st.Skipped[1], filepath.Base(second)) ||
			!strings.Contains(st.Skipped[2], "checksum mismatch") {
			t.Errorf("Skipped = %q, want the three damaged snapshots", st.Skipped)
		}
		t.Logf("skipped: %q", st.Skipped)
		reportDiffs(t, "Load over damaged snapshots", diffTree(st, truth))
	})
	t.Run("no valid snapshot", func(t *testing.T) {
		dst := copyDir(t, src)
		for _, s := range snaps {
			patch(t, inCopy(src, dst, s), 0, []byte("XXXX"))
		}
		wantError(t, dst, "no valid snapshot")
	})
	t.Run("torn last entry", func(t *testing.T) {
		last := es[len(es)-1]
		for _, tc := range []struct {
			name string
			tear func(path string)
		}{
			{"cut", func(p string) { testenv.Must(t, os.Truncate(p, last.off+12+last.length/2)) }},
			{"zeroed", func(p string) { patch(t, p, last.off+12+last.length/2, make([]byte, last.length)) }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				dst := fromFirst(t) // so that the last entry is after the snapshot
				tc.tear(inCopy(src, dst, lastLog))
				st, err := zkdata.Load(dst, zkdata.Options{})
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				full, err := zkdata.Load(src, zkdata.Options{})
				testenv.Must(t, err)
				if st.LastZxid != full.LastZxid-1 {
					t.Errorf("LastZxid = %#x, want %#x", st.LastZxid, full.LastZxid-1)
				}
				if len(st.Skipped) != 1 || !strings.Contains(st.Skipped[0], fmt.Sprintf("offset %d", last.off)) {
					t.Errorf("Skipped = %q, want the torn entry at offset %d", st.Skipped, last.off)
				}
				t.Logf("skipped: %q", st.Skipped)
			})
		}
	})
}

// TestCrashMidWrite kills ZooKeeper while clients write, then checks Load of its directory
// against ZooKeeper started on a copy of it.
func TestCrashMidWrite(t *testing.T) {
	props := serverProps("snappy")
	srv := zkserver.Start(t, zkserver.Options{ConfigLines: []string{"snapCount=50"}, SystemProps: props})
	c := connect(t, srv.Addr, sessionTimeout)
	_, err := c.Create("/app", nil, 0, open)
	testenv.Must(t, err)
	_, err = c.Create("/app/shared", nil, 0, open)
	testenv.Must(t, err)
	done := make(chan struct{})
	for w := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			crashWriter(srv.Addr, w)
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	srv.Stop() // SIGKILL while the writers write
	for range 4 {
		<-done
	}
	dir := copyDir(t, filepath.Join(srv.Dir, "data"))
	st, err := zkdata.Load(dir, zkdata.Options{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	t.Logf("Load: %d nodes, %d sessions, last zxid %#x, skipped %q", len(st.Nodes), len(st.Sessions), st.LastZxid, st.Skipped)
	again := startOn(t, copyDir(t, dir), props)
	reportDiffs(t, "Load differs from ZooKeeper started on the directory", diffTree(st, readTree(t, connect(t, again.addr, sessionTimeout))))
}

// crashWriter writes until its server goes away.
func crashWriter(addr string, w int) {
	c, _, err := zk.Connect([]string{addr}, sessionTimeout, zk.WithLogger(discardLogger{}))
	if err != nil {
		return
	}
	defer c.Close()
	base := fmt.Sprintf("/app/w%d", w)
	for i := 0; ; i++ {
		var err error
		switch i % 4 {
		case 0:
			_, err = c.Create(fmt.Sprintf("%s-%d", base, i%13), []byte("x"), zk.FlagEphemeral*int32(i%2), open)
		case 1:
			_, err = c.Set(fmt.Sprintf("%s-%d", base, (i-1)%13), []byte(fmt.Sprint(i)), -1)
		case 2:
			_, err = c.Create("/app/shared/s-", nil, zk.FlagSequence, open)
		case 3:
			err = c.Delete(fmt.Sprintf("%s-%d", base, (i-3)%13), -1)
		}
		if err == zk.ErrConnectionClosed || err == zk.ErrNoServer || err == zk.ErrClosing || c.State() == zk.StateDisconnected {
			return
		}
		if i > 200000 {
			return
		}
	}
}
