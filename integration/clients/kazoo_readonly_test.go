package clients

import (
	"bufio"
	"context"
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
	ms := itest.FaultCluster(t)
	z := itest.StartProcessArgs(t, itest.FreePort(t), "--endpoints", itest.ClusterEndpoints(ms), "--read-only-mode")
	z.LogOnFailure(t, "zetcd")
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

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join("testdata", "kazoo_readonly.py"), z.Addr, "/kzro")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for s := bufio.NewScanner(stdout); s.Scan(); {
		got = append(got, s.Text())
		if s.Text() == "waiting for read-write" {
			thaw()
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("kazoo_readonly.py: %v\nstdout:\n%s\nstderr:\n%s", err, strings.Join(got, "\n"), stderr.String())
	}
	want := []string{
		"state CONNECTED_RO",
		"get there",
		"create NotReadOnlyCallError",
		"waiting for read-write",
		"state CONNECTED",
		"create after ok",
	}
	if !slices.Equal(got, want) {
		t.Errorf("kazoo_readonly.py printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
