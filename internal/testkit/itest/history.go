package itest

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// History makes every kind of write on the server at addr, rounds times over, through the
// given session, as ZooKeeper's data directory and a live tree must both carry it: creates
// (sequential ones too), setData, deletes and creates again, setACL, multis, a container and a
// TTL node, failed writes (error txns), and the ephemeral gone of a session that closes. Its
// nodes are under /app; extra may write more before the rounds (nodes of its own under /app).
func History(t testing.TB, addr string, rounds int, extra func(c *zk.Conn)) {
	t.Helper()
	open := zk.WorldACL(zk.PermAll)
	c := testenv.Connect(t, addr)
	defer c.Close()
	for _, p := range []string{"/app", "/app/seq", "/app/cfg", "/app/acl", "/app/re"} {
		_, err := c.Create(p, []byte("v "+p), 0, open)
		testenv.Must(t, err)
	}
	_, err := c.Create("/app/null", nil, 0, open)
	testenv.Must(t, err)
	if extra != nil {
		extra(c)
	}
	_, err = c.CreateContainer("/app/container", []byte("c"), zk.FlagContainer, open)
	testenv.Must(t, err)
	_, err = c.Create("/app/container/kid", nil, 0, open)
	testenv.Must(t, err)
	_, err = c.CreateTTL("/app/ttl", []byte("t"), zk.FlagTTL, open, time.Hour)
	testenv.Must(t, err)
	for i := range rounds {
		historyRound(t, c, i)
	}
	// An ephemeral of a closed session is gone (closeSession deletes it).
	s := testenv.Connect(t, addr)
	_, err = s.Create("/app/gone", nil, zk.FlagEphemeral, open)
	testenv.Must(t, err)
	s.Close()
}

// historyRound is round i of History's writes.
func historyRound(t testing.TB, c *zk.Conn, i int) {
	t.Helper()
	open := zk.WorldACL(zk.PermAll)
	_, err := c.Set("/app/cfg", []byte(fmt.Sprintf("v%d", i)), -1)
	testenv.Must(t, err)
	_, err = c.Create("/app/seq/n-", []byte(strconv.Itoa(i)), zk.FlagSequence, open)
	testenv.Must(t, err)
	if i%3 == 0 {
		testenv.Must(t, c.Delete(fmt.Sprintf("/app/seq/n-%010d", i), -1))
	}
	if i%4 == 0 {
		acl := append(zk.DigestACL(zk.PermRead|zk.PermAdmin, "user", fmt.Sprintf("pw%d", i)), open...)
		_, err = c.SetACL("/app/acl", acl, -1)
		testenv.Must(t, err)
	}
	if i%5 == 0 {
		testenv.Must(t, c.Delete("/app/re", -1))
		_, err = c.Create("/app/re", []byte(fmt.Sprint("again ", i)), 0, open)
		testenv.Must(t, err)
	}
	_, err = c.Multi(
		&zk.CreateRequest{Path: fmt.Sprintf("/app/m-%d", i), Data: []byte("m"), Acl: open},
		&zk.SetDataRequest{Path: "/app/cfg", Data: []byte(fmt.Sprintf("m%d", i)), Version: -1},
		&zk.CreateRequest{Path: fmt.Sprintf("/app/m-%d/kid", i), Data: nil, Acl: open},
	)
	testenv.Must(t, err)
	_, err = c.Create("/app/cfg", nil, 0, open)
	testenv.Must(t, err, zk.ErrNodeExists) // a failed write: an error txn
}
