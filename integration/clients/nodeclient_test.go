package clients

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// node-zookeeper-client (testdata/nodeclient.js), the pure-JavaScript client, against zetcd, xchk
// and ZooKeeper: create modes and sequential names, data, exists and child watches, the frame
// order of a pipelined getChildren and the create that fires its watch (the client registers a
// watch when its reply arrives and drops an event that comes first), 50 creates in flight,
// error codes, transactions, digest ACLs and a session's close. The same lines from every
// server.

// envNodeModules names a node_modules directory holding node-zookeeper-client, instead of the
// one `make node` fills (.cache/node/node_modules).
const envNodeModules = "ZETCD_NODE_MODULES"

// nodeClientWant is what nodeclient.js prints when the client gets ZooKeeper's answers.
var nodeClientWant = []string{
	"create /nd/e /nd/s-0000000001 /nd/s-0000000002 /nd/s-0000000003",
	"getChildren e,s-0000000001,s-0000000002,s-0000000003 numChildren=4 cversion=4",
	"data watch 0 NODE_DATA_CHANGED /nd/e",
	"exists watch null NODE_CREATED /nd/x",
	"pipelined NODE_CHILDREN_CHANGED /nd order=event,create",
	"inFlight 50 inOrder=true",
	"errors BAD_VERSION NOT_EMPTY NODE_EXISTS NO_NODE NO_CHILDREN_FOR_EPHEMERALS",
	"transaction failing: BAD_VERSION [0,0,-103] t=false",
	"transaction holding: true [1,5,2]",
	"acl owner=s other=NO_AUTH,NO_AUTH,NO_AUTH acl=digest:alice:V55/p2T0OpjQ+low3NVAH4aLvm0==31",
	"close NODE_DELETED /nd/e",
}

func TestNodeClient(t *testing.T) {
	node, modules := nodeClient(t)
	onEveryServer(t, "nodeclient.js", nodeClientWant, func(t *testing.T, addr string) []string {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "nodeclient.js"), addr)
		cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
		return outputLines(t, cmd, "nodeclient.js")
	})
}

// TestNodeClientSessionMoves: a node-zookeeper-client session holding a data, an exists and a
// child watch loses its zetcd (stopped: its connections closed) and resumes on another in front
// of the same etcd, where it sends its watches again (setWatches, the client's own encoding);
// each fires exactly once for the changes made after the move.
func TestNodeClientSessionMoves(t *testing.T) {
	node, modules := nodeClient(t)
	cluster := startEtcd(t)
	zs := []*testenv.Zetcd{testenv.StartZetcdOn(t, cluster, testenv.Options{}), testenv.StartZetcdOn(t, cluster, testenv.Options{})}
	addrs := []string{zs[0].Addr, zs[1].Addr}
	cmd := exec.Command(node, filepath.Join("testdata", "nodeclient.js"), strings.Join(addrs, ","), "move")
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	client, ready := startPaused(t, cmd, "nodeclient.js move")
	zs[serverOf(t, strings.TrimPrefix(ready, "ready "), addrs)].Stop()
	lines := slices.DeleteFunc(client.resume(), func(l string) bool { return l == ready })
	wantLines(t, "nodeclient.js move", lines, []string{
		"move sameSession=true states=disconnected,connected events=NODE_CHILDREN_CHANGED /ndm,NODE_CREATED /ndm/x,NODE_DATA_CHANGED /ndm/d",
	})
}

// nodeClient returns the node binary and the node_modules directory with node-zookeeper-client;
// the test skips (or fails, with ZETCD_REQUIRE_CLIENTS) without them.
func nodeClient(t *testing.T) (node, modules string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		skipOrRequire(t, "no node (Debian: apt-get install nodejs npm): %v", err)
	}
	modules = os.Getenv(envNodeModules)
	if modules == "" {
		modules, _ = filepath.Abs(filepath.Join("..", "..", ".cache", "node", "node_modules"))
	}
	if _, err := os.Stat(filepath.Join(modules, "node-zookeeper-client", "package.json")); err != nil {
		skipOrRequire(t, "no node-zookeeper-client in %s=%q (make node): %v", envNodeModules, modules, err)
	}
	return node, modules
}
