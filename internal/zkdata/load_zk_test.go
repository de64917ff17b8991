package zkdata_test

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
	"github.com/zetcd/zetcd/internal/zkdata"
)

var (
	open = zk.WorldACL(zk.PermAll)
	// sessionTimeout outlives a test, so that the sessions a restarted server loads are still
	// open when it is read.
	sessionTimeout = 40 * time.Second
)

// serverProps are the system properties of every server here: TTL nodes, small preallocated
// logs (their tail is zeros all the same) and the snapshot compression.
func serverProps(compression string) map[string]string {
	p := map[string]string{
		"zookeeper.extendedTypesEnabled": "true",
		"zookeeper.preAllocSize":         "128",
	}
	if compression != "" {
		p["zookeeper.snapshot.compression.method"] = compression
	}
	return p
}

// buildHistory makes every kind of history through clients of the server at addr, with writers
// running at once so that snapshots (snapCount is low) are fuzzy. Sessions it leaves open keep
// ephemerals.
func buildHistory(t testing.TB, addr string) {
	t.Helper()
	c := connect(t, addr, sessionTimeout)
	keeper := connect(t, addr, sessionTimeout) // left open, with ephemerals
	quitter := connect(t, addr, sessionTimeout)

	_, err := c.Create("/app", []byte("root of the test"), 0, open)
	testenv.Must(t, err)
	_, err = c.Create("/app/shared", nil, 0, open)
	testenv.Must(t, err)
	_, err = c.Create("/app/cfg", []byte("v0"), 0, open)
	testenv.Must(t, err)
	_, err = c.Create("/app/acl", []byte("acl"), 0, open)
	testenv.Must(t, err)
	_, err = c.CreateContainer("/app/container", []byte("c"), zk.FlagContainer, open)
	testenv.Must(t, err)
	_, err = c.CreateTTL("/app/ttl", []byte("t"), zk.FlagTTL, open, time.Hour)
	testenv.Must(t, err)
	_, err = c.CreateTTL("/app/ttlseq-", []byte("ts"), zk.FlagPersistentSequentialWithTTL, open, 2*time.Hour)
	testenv.Must(t, err)
	_, err = c.Create("/app/null", nil, 0, open)
	testenv.Must(t, err)
	big := make([]byte, 300<<10)
	for i := range big {
		big[i] = byte(i * 7)
	}
	_, err = c.Create("/app/big", big, 0, open)
	testenv.Must(t, err)

	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			writer(t, addr, w)
		}()
	}
	for i := range 30 {
		_, err = c.Set("/app/cfg", []byte(fmt.Sprintf("v%d", i+1)), -1)
		testenv.Must(t, err)
		_, err = keeper.Create(fmt.Sprintf("/app/eph-%d", i), []byte("k"), zk.FlagEphemeral, open)
		testenv.Must(t, err)
		_, err = quitter.Create(fmt.Sprintf("/app/shared/q-%d", i), nil, zk.FlagEphemeral, open)
		testenv.Must(t, err)
		if i%3 == 0 {
			_, err = keeper.Create("/app/shared/kseq-", nil, zk.FlagEphemeralSequential, open)
			testenv.Must(t, err)
		}
		acl := zk.DigestACL(zk.PermRead|zk.PermAdmin, "user", fmt.Sprintf("pw%d", i))
		_, err = c.SetACL("/app/acl", append(acl, zk.WorldACL(zk.PermRead|zk.PermAdmin)...), -1)
		testenv.Must(t, err)
		// Multis: one that commits and one that fails (a multi of error txns in the log).
		_, err = c.Multi(
			&zk.CreateRequest{Path: fmt.Sprintf("/app/m-%d", i), Data: []byte("m"), Acl: open},
			&zk.SetDataRequest{Path: "/app/cfg", Data: []byte(fmt.Sprintf("m%d", i)), Version: -1},
			&zk.CheckVersionRequest{Path: "/app/acl", Version: -1},
		)
		testenv.Must(t, err)
		_, err = c.Multi(
			&zk.CreateRequest{Path: fmt.Sprintf("/app/never-%d", i), Data: nil, Acl: open},
			&zk.CheckVersionRequest{Path: "/app/cfg", Version: 999999},
		)
		testenv.Must(t, err, zk.ErrBadVersion)
		if i%2 == 1 {
			_, err = c.Multi(&zk.DeleteRequest{Path: fmt.Sprintf("/app/m-%d", i-1), Version: -1})
			testenv.Must(t, err)
		}
		// Failed single writes are error txns in the log.
		_, err = c.Create("/app/cfg", nil, 0, open)
		testenv.Must(t, err, zk.ErrNodeExists)
		err = c.Delete("/app/nothing", -1)
		testenv.Must(t, err, zk.ErrNoNode)
		_, err = c.Create(fmt.Sprintf("/app/container/child-%d", i), nil, 0, open)
		testenv.Must(t, err)
		if i%2 == 0 {
			testenv.Must(t, c.Delete(fmt.Sprintf("/app/container/child-%d", i), -1))
		}
		// Sessions that open and close, some leaving ephemerals to the closeSession.
		if i%5 == 0 {
			s := connect(t, addr, 6*time.Second)
			_, err = s.Create(fmt.Sprintf("/app/shared/short-%d", i), nil, zk.FlagEphemeral, open)
			testenv.Must(t, err)
			s.Close()
		}
	}
	wg.Wait()
	quitter.Close()
}

// writer churns its own subtree and the shared one: creates, sequential creates, setData,
// deletes and re-creates.
func writer(t testing.TB, addr string, w int) {
	c := connect(t, addr, sessionTimeout)
	base := fmt.Sprintf("/app/w%d", w)
	if _, err := c.Create(base, nil, 0, open); err != nil {
		t.Error(err)
		return
	}
	for i := range 60 {
		p := fmt.Sprintf("%s/n%d", base, i%7)
		if _, err := c.Create(p, []byte(fmt.Sprint(i)), 0, open); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Error(err)
			return
		}
		if _, err := c.Set(p, []byte(fmt.Sprintf("set %d", i)), -1); err != nil {
			t.Error(err)
			return
		}
		if i%3 == 0 {
			if err := c.Delete(p, -1); err != nil {
				t.Error(err)
				return
			}
		}
		if _, err := c.Create("/app/shared/seq-", []byte(base), zk.FlagSequence, open); err != nil {
			t.Error(err)
			return
		}
		sp := fmt.Sprintf("/app/shared/x%d", i%5)
		if _, err := c.Create(sp, nil, 0, open); err == nil {
			_ = c.Delete(sp, -1)
		}
	}
}

// TestLoadMatchesZooKeeper builds a history on a real ZooKeeper for each snapshot compression,
// reads the tree through a client, kills the server and checks that Load of its directory
// gives the same nodes and sessions; then starts ZooKeeper on a copy of the directory and
// checks that it reads back what Load gave.
func TestLoadMatchesZooKeeper(t *testing.T) {
	for _, comp := range []string{"", "gz", "snappy"} {
		name := comp
		if name == "" {
			name = "plain"
		}
		t.Run(name, func(t *testing.T) {
			props := serverProps(comp)
			srv := zkserver.Start(t, zkserver.Options{ConfigLines: []string{"snapCount=20"}, SystemProps: props})
			buildHistory(t, srv.Addr)
			reader := connect(t, srv.Addr, sessionTimeout)
			truth := readTree(t, reader)
			sessions := serverSessions(t, srv.Addr)
			srv.Stop() // SIGKILL
			dataDir := filepath.Join(srv.Dir, "data")

			begin := time.Now()
			st, err := zkdata.Load(dataDir, zkdata.Options{})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			t.Logf("Load: %d nodes, %d sessions, last zxid %#x, snapshot %s, in %v; skipped: %q",
				len(st.Nodes), len(st.Sessions), st.LastZxid, filepath.Base(st.Snapshot), time.Since(begin), st.Skipped)
			reportDiffs(t, "Load differs from the server that wrote the directory", diffTree(st, truth))
			reportDiffs(t, "Load's sessions differ from the server's", diffSessions(st, sessions))
			checkKinds(t, st)
			checkAll(t, st)
			loadFromEverySnapshot(t, dataDir, truth, sessions)

			// ZooKeeper's own load of the same directory.
			again := startOn(t, copyDir(t, dataDir), props)
			reportDiffs(t, "Load differs from ZooKeeper started on the directory", diffTree(st, readTree(t, connect(t, again.addr, sessionTimeout))))
		})
	}
}

// checkKinds checks the node kinds the history made.
func checkKinds(t *testing.T, st *zkdata.State) {
	t.Helper()
	want := map[string]zkdata.EphemeralType{
		"/app/container": zkdata.Container, "/app/ttl": zkdata.TTL, "/app/eph-0": zkdata.Ephemeral, "/app/cfg": zkdata.Persistent,
	}
	for p, typ := range want {
		if n := st.Nodes[p]; n == nil || n.Type() != typ {
			t.Errorf("%s: type %v, want %v", p, n.Type(), typ)
		}
	}
	if ttl := st.Nodes["/app/ttl"].TTL(); ttl != time.Hour.Milliseconds() {
		t.Errorf("/app/ttl: TTL %d, want %d", ttl, time.Hour.Milliseconds())
	}
}

// loadFromEverySnapshot loads the directory once for each of its snapshots, with the newer ones
// left out, so that the logs are replayed over every fuzzy snapshot the server wrote; each
// load must give the same tree.
func loadFromEverySnapshot(t *testing.T, dataDir string, truth map[string]clientNode, sessions map[int64]int32) {
	t.Helper()
	v := filepath.Join(dataDir, "version-2")
	entries, err := os.ReadDir(v)
	if err != nil {
		t.Fatal(err)
	}
	var snaps, logs []string
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e.Name(), "snapshot."):
			snaps = append(snaps, e.Name())
		case strings.HasPrefix(e.Name(), "log."):
			logs = append(logs, e.Name())
		}
	}
	replayed := 0
	for _, snap := range snaps {
		dir := filepath.Join(t.TempDir(), "version-2")
		testenv.Must(t, os.Mkdir(dir, 0o755))
		for _, f := range append([]string{snap}, logs...) {
			testenv.Must(t, os.Link(filepath.Join(v, f), filepath.Join(dir, f)))
		}
		st, err := zkdata.Load(dir, zkdata.Options{})
		if err != nil {
			t.Errorf("Load with only %s: %v", snap, err)
			continue
		}
		replayed += int(st.LastZxid - snapZxid(t, st.Snapshot))
		reportDiffs(t, "Load with only "+snap, diffTree(st, truth))
		reportDiffs(t, "sessions, Load with only "+snap, diffSessions(st, sessions))
	}
	t.Logf("loaded from each of %d snapshots, replaying %d transactions in all", len(snaps), replayed)
}

func snapZxid(t *testing.T, path string) int64 {
	var z int64
	if _, err := fmt.Sscanf(strings.Split(filepath.Base(path), ".")[1], "%x", &z); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return z
}

// TestLoadLargeZooKeeperTree makes a tree of 200000 nodes on a real ZooKeeper with multis of
// 500 creates and setData, and compares every 97th node and the node count with Load of its
// directory. It takes a few seconds; -short skips it.
func TestLoadLargeZooKeeperTree(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	const parents, perParent = 400, 500
	props := serverProps("snappy")
	srv := zkserver.Start(t, zkserver.Options{ConfigLines: []string{"snapCount=200"}, SystemProps: props})
	c := connect(t, srv.Addr, sessionTimeout)
	begin := time.Now()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := w; p < parents; p += 4 {
				ops := []any{&zk.CreateRequest{Path: fmt.Sprintf("/p%d", p), Acl: open}}
				for i := range perParent - 1 {
					ops = append(ops, &zk.CreateRequest{Path: fmt.Sprintf("/p%d/n%d", p, i), Data: []byte(fmt.Sprint(i)), Acl: open})
				}
				if _, err := c.Multi(ops...); err != nil {
					t.Error(err)
					return
				}
				if _, err := c.Multi(&zk.SetDataRequest{Path: fmt.Sprintf("/p%d/n1", p), Data: []byte("x"), Version: -1}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("made %d nodes in %v", parents*perParent, time.Since(begin))
	sample := make(map[string]clientNode)
	for p := range parents {
		for i := p % 97; i < perParent-1; i += 97 {
			path := fmt.Sprintf("/p%d/n%d", p, i)
			data, stat, err := c.Get(path)
			testenv.Must(t, err)
			acl, _, err := c.GetACL(path)
			testenv.Must(t, err)
			sample[path] = clientNode{data: data, acl: acl, stat: *stat}
		}
	}
	srv.Stop()

	begin = time.Now()
	st, err := zkdata.Load(filepath.Join(srv.Dir, "data"), zkdata.Options{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	t.Logf("Load: %d nodes from %s in %v", len(st.Nodes), filepath.Base(st.Snapshot), time.Since(begin))
	if want := parents*perParent + 4; len(st.Nodes) != want {
		t.Errorf("%d nodes, want %d", len(st.Nodes), want)
	}
	var diffs []string
	for _, d := range diffTree(st, sample) {
		if !strings.HasSuffix(d, "not on the server") {
			diffs = append(diffs, d)
		}
	}
	reportDiffs(t, "Load differs from the server", diffs)
}

// checkAll checks that st.All yields every node of st.Nodes once, each one's parent before it.
func checkAll(t *testing.T, st *zkdata.State) {
	t.Helper()
	seen := map[string]bool{}
	for n := range st.All() {
		if st.Nodes[n.Path] != n {
			t.Errorf("All yields %s, which is not the node Nodes holds at that path", n.Path)
		}
		if seen[n.Path] {
			t.Errorf("All yields %s twice", n.Path)
		}
		if parent := cmp.Or(n.Path[:strings.LastIndexByte(n.Path, '/')], "/"); n.Path != "/" && !seen[parent] {
			t.Errorf("All yields %s before its parent %s", n.Path, parent)
		}
		seen[n.Path] = true
	}
	if len(seen) != len(st.Nodes) {
		t.Errorf("All yields %d nodes, Nodes holds %d", len(seen), len(st.Nodes))
	}
}
