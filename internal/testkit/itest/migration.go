package itest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
	"github.com/zetcd/zetcd/migrate"
)

// Migration is a real ZooKeeper and a real zetcd process in migration mode (--migrate-from)
// copying it into a fresh etcd (docs/migration.md, "Migration mode"): clients connected to Addr
// are relayed to ZooKeeper until Cutover moves them to zetcd.
type Migration struct {
	ZooKeeper []*zkserver.Server // the servers zetcd migrates from, in --migrate-from
	Zetcd     *ZetcdProcess
	Addr      string // zetcd's client address
	Metrics   string // zetcd's --metrics-addr: GET /migrate, POST /migrate/cutover
}

// MigrationOptions changes how StartMigration starts its servers. The zero value starts a
// ZooKeeper of its own and a zetcd with an embedded etcd in a temporary directory.
type MigrationOptions struct {
	// ZooKeeper are the servers of a ZooKeeper (an ensemble's, zkserver.StartEnsemble) to
	// migrate from, instead of a new standalone one.
	ZooKeeper []*zkserver.Server
	// Endpoints, when set, are the etcd client URLs zetcd stores the copy in (--endpoints),
	// instead of an embedded etcd.
	Endpoints string
	// Args are further flags for zetcd.
	Args []string
}

// StartMigration starts ZooKeeper (unless given) and zetcd in migration mode from it; both stop
// when the test ends, and zetcd's log is shown if the test fails.
func StartMigration(t *testing.T, o MigrationOptions) *Migration {
	t.Helper()
	m := &Migration{ZooKeeper: o.ZooKeeper, Addr: FreePort(t), Metrics: FreePort(t)}
	if len(m.ZooKeeper) == 0 {
		m.ZooKeeper = []*zkserver.Server{zkserver.Start(t, zkserver.Options{})}
	}
	var from []string
	for _, s := range m.ZooKeeper {
		from = append(from, s.Addr)
	}
	store := []string{"--data-dir", t.TempDir()}
	if o.Endpoints != "" {
		store = []string{"--endpoints", o.Endpoints}
	}
	args := append(append(store, "--metrics-addr", m.Metrics, "--migrate-from", strings.Join(from, ","), "--log-level", "info"), o.Args...)
	m.Zetcd = StartProcessArgs(t, m.Addr, args...)
	m.Zetcd.LogOnFailure(t, "zetcd in migration mode")
	return m
}

// StopZooKeeper stops every ZooKeeper server.
func (m *Migration) StopZooKeeper() {
	for _, s := range m.ZooKeeper {
		s.Stop()
	}
}

// MigrationStatus is what GET /migrate answers (docs/migration.md, "Migration mode").
type MigrationStatus struct {
	migrate.Status
	Cutover CutoverStatus    `json:"cutover"`
	Relayed []RelayedSession `json:"relayedSessions"`
}

// CutoverStatus is GET /migrate's cutover.
type CutoverStatus struct {
	State         string    `json:"state"`
	Step          string    `json:"step"`
	Started       time.Time `json:"started"`
	ZooKeeperZxid string    `json:"zookeeperZxid"`
	TakenOver     []string  `json:"takenOver"`
	Skipped       []string  `json:"skipped"`
	Errors        []string  `json:"errors"`
}

// RelayedSession is one of GET /migrate's relayedSessions.
type RelayedSession struct {
	ID         string `json:"id"`
	TimeoutMs  int64  `json:"timeoutMs"`
	LastZxid   string `json:"lastZxid"`
	Server     string `json:"server"`
	Connected  bool   `json:"connected"`
	Closed     bool   `json:"closed"`
	Expired    bool   `json:"expired"`
	Ephemerals int    `json:"ephemerals"`
	Watches    int    `json:"watches"`
}

// Status answers GET /migrate.
func (m *Migration) Status(t testing.TB) MigrationStatus {
	t.Helper()
	resp, err := http.Get("http://" + m.Metrics + "/migrate")
	testenv.Must(t, err)
	defer resp.Body.Close()
	var s MigrationStatus
	testenv.Must(t, json.NewDecoder(resp.Body).Decode(&s))
	return s
}

// WaitCaughtUp waits until /migrate says the copy holds every transaction up to ZooKeeper's zxid
// least or a later one; the test fails if the migration failed or does not catch up in 60 s.
func (m *Migration) WaitCaughtUp(t testing.TB, least int64) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, "the copy caught up with ZooKeeper", func() error {
		st := m.Status(t)
		if st.State == migrate.StateFailed {
			t.Fatalf("the migration failed: %+v", st)
		}
		var zxid int64
		fmt.Sscanf(st.ZooKeeperZxid, "0x%x", &zxid)
		if st.State != migrate.StateCaughtUp || zxid < least {
			return fmt.Errorf("/migrate: %+v", st.Status)
		}
		return nil
	})
}

// PostCutover asks for the cutover and returns the answer's status code and body.
func (m *Migration) PostCutover(t testing.TB, query ...string) (int, string) {
	t.Helper()
	resp, err := http.Post("http://"+m.Metrics+"/migrate/cutover?"+strings.Join(query, "&"), "", nil)
	testenv.Must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Cutover waits until the copy is loaded, asks for the cutover, and returns /migrate's cutover
// once it is done. It does not wait for the copy to catch up, which a client writing without
// pause may keep from happening: the cutover catches up itself. A refusal (409) is asked again
// for up to 20 s, as ZooKeeper's cons may still list a connection closed a moment ago; the test
// fails if the cutover is not done then.
func (m *Migration) Cutover(t testing.TB) CutoverStatus {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, "the copy loaded", func() error {
		switch st := m.Status(t); st.State {
		case migrate.StateFailed:
			t.Fatalf("the migration failed: %+v", st)
		case migrate.StateLoading:
			return fmt.Errorf("/migrate: %+v", st.Status)
		}
		return nil
	})
	code, body := m.PostCutover(t)
	for deadline := time.Now().Add(20 * time.Second); code == http.StatusConflict && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		code, body = m.PostCutover(t)
	}
	if code != http.StatusOK {
		t.Fatalf("POST /migrate/cutover: %d %s; /migrate: %+v", code, body, m.Status(t))
	}
	cs := m.Status(t).Cutover
	if cs.State != "done" {
		t.Fatalf("/migrate's cutover after a cutover answered 200: %+v", cs)
	}
	return cs
}

// Zxids reads the czxid, mzxid and pzxid of every node of the tree through c, by path: after a
// cutover zetcd shows ZooKeeper's own (docs/migration.md, "Cutover").
func Zxids(t testing.TB, c *zk.Conn) map[string][3]int64 {
	t.Helper()
	out := map[string][3]int64{}
	stack := []string{"/"}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		children, st, err := c.Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			continue // gone since its parent was read
		}
		testenv.Must(t, err)
		out[p] = [3]int64{st.Czxid, st.Mzxid, st.Pzxid}
		for _, name := range children {
			stack = append(stack, path.Join(p, name))
		}
	}
	return out
}
