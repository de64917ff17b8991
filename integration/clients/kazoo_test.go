package clients

import "testing"

// kazoo's recipes (testdata/kazoo_recipes.py) against zetcd, xchk and ZooKeeper: locks, a
// read-write lock, an election, a locking queue, a counter, a double barrier, a semaphore,
// data, children and party watches, a tree cache and transactions, each step's outcome as a
// user of the recipe relies on it, the same lines from every server. kazoo is a client of
// its own (Python, not the Java client's code), with its own ordering of replies and events.

// kazooWant is what kazoo_recipes.py prints when every recipe works.
var kazooWant = []string{
	"lock count=80 version=80 mostAtOnce=1 lockNodesLeft=0",
	"rwlock readersTogether=True writerWhileRead=False writerAfter=True",
	"election led=['p0', 'p1', 'p2'] mostAtOnce=1 contendersLeft=0",
	"lockingQueue taken=60 distinct=60 eachInOrder=True left=0",
	"counter value=100",
	"doubleBarrier passed=3 passedEarly=0 left=0",
	"semaphore acquired=25 atMostTwo=True",
	"watches data 0 initial",
	"watches children []",
	"watches data 1 CHANGED",
	"watches children ['e']",
	"watches children []",
	"watches party=['m0', 'm1']",
	"watches data None DELETED",
	"treeCache INITIALIZED",
	"treeCache NODE_ADDED /kz/tree/a=1",
	"treeCache NODE_ADDED /kz/tree=",
	"treeCache NODE_UPDATED /kz/tree/a=2",
	"treeCache NODE_ADDED /kz/tree/a/b=3",
	"treeCache NODE_REMOVED /kz/tree/a/b=3",
	"transaction failing: RolledBackError RolledBackError BadVersionError a=False data=v0",
	"transaction holding: /kz/txn/s-0000000000 ZnodeStat bool",
	"transaction setAfter ok",
}

func TestKazooRecipes(t *testing.T) {
	py := kazooPython(t)
	onEveryServer(t, "kazoo_recipes.py", kazooWant, func(t *testing.T, addr string) []string {
		return kazooClient(t, py, "kazoo_recipes.py", addr)
	})
}
