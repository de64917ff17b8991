package integration

import (
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// Short names for the shared test environment (internal/testkit/testenv).
var (
	startEtcd     = testenv.StartEtcd
	forEachServer = testenv.ForEachServer
	connect       = testenv.Connect
	openACL       = zk.WorldACL(zk.PermAll)
)

// startZetcdOn starts a zetcd in front of c with the default test configuration.
func startZetcdOn(t testing.TB, c *testenv.Etcd) *testenv.Zetcd {
	return testenv.StartZetcdOn(t, c, testenv.Options{})
}

// zxidAfter reports whether zxid b is the n-th after a when nothing else was written meanwhile,
// on either numbering: ZooKeeper gives each write the next integer; zetcd gives a write alone in
// its etcd revision the revision in the high bits and index 0 in the low 16
// (etcdstore/zxid.go), so the n-th write after a is ((a>>16)+n)<<16.
func zxidAfter[Z ~int64](a, b Z, n int64) bool {
	return b == a+Z(n) || b == (a>>16+Z(n))<<16
}
