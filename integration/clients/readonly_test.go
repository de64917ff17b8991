package clients

import (
	"bufio"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
)

// TestKazooReadOnly: kazoo with read_only=True, on a zetcd with --read-only-mode over a
// three-member etcd whose two followers are frozen, and on a ZooKeeper ensemble with
// readonlymode.enabled whose two other servers are frozen, connects read-only (CONNECTED_RO),
// reads what was there and gets NotReadOnlyCallError for a write; once the frozen members are
// back it is connected read-write again by itself and writes.
func TestKazooReadOnly(t *testing.T) {
	py := kazooPython(t)
	readOnlyClient(t, func(t *testing.T, addr string) *exec.Cmd {
		return exec.Command(py, filepath.Join("testdata", "kazoo_readonly.py"), addr, "/kzro")
	}, []string{
		"state CONNECTED_RO",
		"get there",
		"create NotReadOnlyCallError",
		"waiting for read-write",
		"state CONNECTED",
		"create after ok",
	})
}

// TestJavaReadOnly is TestKazooReadOnly for ZooKeeper's Java client with canBeReadOnly, which
// also polls isro to find a read-write server.
func TestJavaReadOnly(t *testing.T) {
	readOnlyClient(t, func(t *testing.T, addr string) *exec.Cmd {
		return javaProgram(t, t.TempDir(), "ReadOnlyClient.java", nil, nil, addr, "/kzro")
	}, []string{
		"state ConnectedReadOnly",
		"get there",
		"create NotReadOnly",
		"waiting for read-write",
		"state SyncConnected",
		"create after ok",
	})
}

// TestCuratorReadOnly is TestKazooReadOnly for Curator with canBeReadOnly(true): READ_ONLY,
// then CONNECTED read-write: Curator reports the first read-write connection as CONNECTED.
func TestCuratorReadOnly(t *testing.T) {
	lib := curatorLib(t)
	readOnlyClient(t, func(t *testing.T, addr string) *exec.Cmd {
		return javaProgram(t, t.TempDir(), "CuratorReadOnly.java", []string{lib}, nil, addr, "/kzro")
	}, []string{
		"state READ_ONLY",
		"get there",
		"create NotReadOnly",
		"waiting for read-write",
		"state CONNECTED",
		"create after ok",
	})
}

// quorumServer is a server whose quorum a test takes away (freeze) and gives back (thaw).
type quorumServer struct {
	addr         string
	freeze, thaw func()
}

// zetcdQuorumServer is a zetcd with --read-only-mode over a three-member etcd; freeze stops
// (SIGSTOP) the two followers.
func zetcdQuorumServer(t *testing.T) quorumServer {
	ms := itest.FaultCluster(t)
	z := itest.StartProcessArgs(t, itest.FreePort(t), "--endpoints", itest.ClusterEndpoints(ms), "--read-only-mode")
	z.LogOnFailure(t, "zetcd")
	leader := itest.ClusterLeader(t, ms)
	var frozen []*itest.EtcdMember
	for _, m := range ms {
		if m != leader {
			frozen = append(frozen, m)
		}
	}
	return quorumServer{
		addr:   z.Addr,
		freeze: func() { signalAll(t, frozen, syscall.SIGSTOP) },
		thaw:   func() { signalAll(t, frozen, syscall.SIGCONT) },
	}
}

func signalAll(t *testing.T, ms []*itest.EtcdMember, sig syscall.Signal) {
	for _, m := range ms {
		m.Signal(t, sig)
	}
}

// zookeeperQuorumServer is the first server of a three-node ZooKeeper ensemble with
// readonlymode.enabled, and localSessionsEnabled, without which it refuses read-only clients'
// sessions; freeze stops (SIGSTOP) the two others.
func zookeeperQuorumServer(t *testing.T) quorumServer {
	zks := zkserver.StartEnsemble(t, 3, zkserver.Options{
		SystemProps: map[string]string{"readonlymode.enabled": "true"},
		ConfigLines: []string{"localSessionsEnabled=true"},
	})
	signal := func(sig syscall.Signal) {
		for _, s := range zks[1:] {
			if err := s.Signal(sig); err != nil {
				t.Error(err)
			}
		}
	}
	return quorumServer{
		addr:   zks[0].Addr,
		freeze: func() { signal(syscall.SIGSTOP) },
		thaw:   func() { signal(syscall.SIGCONT) },
	}
}

// readOnlyClient runs a client program against zetcd and against ZooKeeper (quorumServer):
// /kzro holds "there"; the quorum is taken away until the server answers isro with ro; the
// program (command(addr)) runs then, and the quorum is given back when it prints "waiting for
// read-write". It must print want, line for line, on both.
func readOnlyClient(t *testing.T, command func(t *testing.T, addr string) *exec.Cmd, want []string) {
	for name, start := range map[string]func(*testing.T) quorumServer{"zetcd": zetcdQuorumServer, "zookeeper": zookeeperQuorumServer} {
		t.Run(name, func(t *testing.T) {
			srv := start(t)
			cmd := command(t, srv.addr) // may skip the test: before the outage
			setup := itest.ConnectRaw(t, srv.addr)
			setup.MustCreate("/kzro", []byte("there"), encoding.ModePersistent)
			setup.Conn.Close()
			srv.freeze()
			thawed := false
			thaw := func() {
				if !thawed {
					thawed = true
					srv.thaw()
				}
			}
			t.Cleanup(thaw)
			testenv.Eventually(t, 60*time.Second, "isro answering ro", func() error {
				if out, err := itest.FourLetter(srv.addr, "isro"); out != "ro" {
					return fmt.Errorf("isro: %q, %v", out, err)
				}
				return nil
			})
			got := runUntil(t, cmd, "waiting for read-write", thaw)
			if !slices.Equal(got, want) {
				t.Errorf("the client printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// runUntil runs cmd for three minutes at most, calls f when it prints the line at, and returns
// the lines it printed; the test fails if it fails.
func runUntil(t *testing.T, cmd *exec.Cmd, at string, f func()) []string {
	t.Helper()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killer := time.AfterFunc(3*time.Minute, func() { cmd.Process.Kill() })
	defer killer.Stop()
	var got []string
	for s := bufio.NewScanner(stdout); s.Scan(); {
		got = append(got, s.Text())
		if s.Text() == at {
			f()
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %v\nstdout:\n%s\nstderr:\n%s", cmd.Args, err, strings.Join(got, "\n"), stderr.String())
	}
	return got
}
