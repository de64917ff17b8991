package zkserver

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// quorumMainClass runs a server of an ensemble (zoo.cfg with server.N lines and a myid file).
const quorumMainClass = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

// StartEnsemble starts n ZooKeeper servers as one ensemble on 127.0.0.1, each with its own free
// ports and its data in a t.TempDir(), waits until every one serves (srvr reports a Mode), and
// registers a t.Cleanup that stops them. opts applies to every server: its ConfigLines follow
// the ensemble's own (server.N, initLimit, syncLimit). A test stops a server with Stop. It skips
// or fails as Start does when java or the jars are missing. It must be called from the test's
// goroutine.
func StartEnsemble(t testing.TB, n int, opts Options) []*Server {
	t.Helper()
	java, lib := locateOrSkip(t)
	dirs, clientPorts := make([]string, n), make([]int, n)
	lines := []string{"initLimit=10", "syncLimit=5"}
	for i := range n {
		dirs[i] = t.TempDir()
		ports := make([]int, 3) // client, quorum, election
		for j := range ports {
			var err error
			if ports[j], err = freePort(); err != nil {
				t.Fatalf("zkserver: pick a port: %v", err)
			}
		}
		clientPorts[i] = ports[0]
		lines = append(lines, fmt.Sprintf("server.%d=127.0.0.1:%d:%d:participant;127.0.0.1:%d", i+1, ports[1], ports[2], ports[0]))
	}
	opts.ConfigLines = append(lines, opts.ConfigLines...)
	servers := make([]*Server, n)
	for i := range n {
		dataDir := filepath.Join(dirs[i], "data")
		if err := os.MkdirAll(dataDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dataDir, "myid"), []byte(strconv.Itoa(i+1)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := launch(java, lib, dirs[i], clientPorts[i], opts, quorumMainClass)
		if err != nil {
			t.Fatalf("zkserver: ensemble server %d: %v", i+1, err)
		}
		servers[i] = s
		t.Cleanup(s.Stop)
	}
	for i, s := range servers {
		if err := s.waitReady(filepath.Join(dirs[i], "data")); err != nil {
			t.Fatalf("zkserver: ensemble server %d: %v", i+1, err)
		}
	}
	return servers
}
