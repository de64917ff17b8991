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
)

// TestKazooReadOnly: kazoo with read_only=True, on a zetcd with --read-only-mode over a
// three-member etcd whose two followers are frozen, connects read-only (CONNECTED_RO), reads
// what was there and gets NotReadOnlyCallError for a write; once the members are back it is
// connected read-write again by itself and writes.
func TestKazooReadOnly(t *testing.T) {
	py := kazooPython(t)
	readOnlyClient(t, func(addr string) *exec.Cmd {
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
	dir := t.TempDir()
	readOnlyClient(t, func(addr string) *exec.Cmd {
		return javaProgram(t, dir, "ReadOnlyClient.java", nil, nil, addr, "/kzro")
	}, []string{
		"state ConnectedReadOnly",
		"get there",
		"create NotReadOnly",
		"waiting for read-write",
		"state SyncConnected",
		"create after ok",
	})
}

// readOnlyClient runs a client program on a zetcd with --read-only-mode over a three-member
// etcd: /kzro holds "there"; the two followers are frozen until zetcd answers isro with ro; the
// program (command(addr)) runs then, and the followers are thawed when it prints "waiting for
// read-write". It must print want, line for line.
func readOnlyClient(t *testing.T, command func(addr string) *exec.Cmd, want []string) {
	t.Helper()
	ms := itest.FaultCluster(t)
	z := itest.StartProcessArgs(t, itest.FreePort(t), "--endpoints", itest.ClusterEndpoints(ms), "--read-only-mode")
	z.LogOnFailure(t, "zetcd")
	cmd := command(z.Addr) // may skip the test: before the outage
	setup := itest.ConnectRaw(t, z.Addr)
	setup.MustCreate("/kzro", []byte("there"), encoding.ModePersistent)
	setup.Conn.Close()

	frozen := make([]*itest.EtcdMember, 0, 2)
	leader := itest.ClusterLeader(t, ms)
	for _, m := range ms {
		if m != leader {
			frozen = append(frozen, m)
		}
	}
	for _, m := range frozen {
		m.Signal(t, syscall.SIGSTOP)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			for _, m := range frozen {
				m.Signal(t, syscall.SIGCONT)
			}
		}
	}
	t.Cleanup(thaw)
	testenv.Eventually(t, 30*time.Second, "isro answering ro", func() error {
		if out, err := itest.FourLetter(z.Addr, "isro"); out != "ro" {
			return fmt.Errorf("isro: %q, %v", out, err)
		}
		return nil
	})

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
		if s.Text() == "waiting for read-write" {
			thaw()
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %v\nstdout:\n%s\nstderr:\n%s", cmd.Args, err, strings.Join(got, "\n"), stderr.String())
	}
	if !slices.Equal(got, want) {
		t.Errorf("the client printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
