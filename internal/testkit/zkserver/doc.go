// Package zkserver starts a real Apache ZooKeeper server for tests, from the jars that
// tools/zookeeper/fetch.sh (make zookeeper) puts in .cache/zookeeper/lib.
//
// Real ZooKeeper is the oracle zetcd is checked against: a behaviour test written once runs
// against zetcd and against the server started here. It is test tooling: only tests and
// internal/testkit import it.
//
//	func TestSomething(t *testing.T) {
//		s := zkserver.Start(t, zkserver.Options{})
//		conn, _, err := zk.Connect([]string{s.Addr}, 5*time.Second)
//		...
//	}
//
// Each Start runs its own JVM on 127.0.0.1 with a free port and its data in t.TempDir(), and
// stops it when the test ends; it takes about half a second. When the jars (or java) are not
// found, Start skips the test, unless ZETCD_REQUIRE_ZOOKEEPER is set to a non-empty value other
// than "0" (CI sets it), in which case it fails the test. ZETCD_ZOOKEEPER_LIB names another
// directory of jars.
//
// The server runs with zookeeper.extendedTypesEnabled=true (TTL nodes), all four-letter words
// allowed, no AdminServer and no connection limit; its log (WARN and above) goes to
// Server.LogFile, whose tail is shown when the server does not start.
package zkserver
