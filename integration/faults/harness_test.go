package faults

import (
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// Short names for the shared test environment (internal/testkit/testenv).
var (
	startEtcd = testenv.StartEtcd
	connect   = testenv.Connect
	openACL   = zk.WorldACL(zk.PermAll)
)

// startZetcdOn starts a zetcd in front of c with the default test configuration.
func startZetcdOn(t testing.TB, c *testenv.Etcd) *testenv.Zetcd {
	return testenv.StartZetcdOn(t, c, testenv.Options{})
}
