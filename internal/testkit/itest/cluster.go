package itest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// BuildEtcdMember builds the etcd member binary (tools/bench/benchetcd) once per test binary.
var BuildEtcdMember = GoBinary("github.com/zetcd/zetcd/tools/bench/benchetcd", "benchetcd")

// EtcdMember is one member of a test's etcd cluster, running as its own process.
type EtcdMember struct {
	Name, ClientURL string
	Cmd             *exec.Cmd
	ready           <-chan error  // start's report: nil once serving, else why not
	Exited          chan struct{} // closed once cmd has exited
	pid             atomic.Int64  // cmd's process, as last started, for PeerNet's goroutines
}

// Signal sends sig to the member's process (SIGSTOP pauses it, SIGCONT resumes it).
func (m *EtcdMember) Signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := m.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to etcd member %s: %v", sig, m.Name, err)
	}
}

// StartEtcdCluster starts a new three-member etcd cluster on loopback and waits until every
// member serves. The members are killed when the test ends. A cluster whose member found its
// port taken (FreePort's port is free only until another process binds it) is started again on
// other ports, at most three times in all.
//
// With pn, the members talk to each other through its proxies, which can cut them off.
func StartEtcdCluster(t *testing.T, pn *PeerNet) []*EtcdMember {
	t.Helper()
	bin, err := BuildEtcdMember()
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; ; attempt++ {
		members, err := TryEtcdCluster(t, bin, pn)
		if err == nil {
			return members
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
		t.Logf("etcd cluster, attempt %d: %v; starting it again on other ports", attempt, err)
	}
}

// TryEtcdCluster starts three members on fresh ports (behind pn's proxies, if set) and waits
// until each serves. On an error it has killed the members it started.
func TryEtcdCluster(t *testing.T, bin string, pn *PeerNet) ([]*EtcdMember, error) {
	const n = 3
	peers, listens := make([]string, n), make([]string, n)
	var cluster []string
	for i := range peers {
		listens[i] = FreePort(t)
		peers[i] = listens[i]
		if pn != nil {
			p, err := pn.Listen(i, listens[i])
			if err != nil {
				return nil, err
			}
			peers[i] = p
		}
		cluster = append(cluster, fmt.Sprintf("m%d=http://%s", i+1, peers[i]))
	}
	members := make([]*EtcdMember, n)
	for i := range members {
		members[i] = &EtcdMember{Name: fmt.Sprintf("m%d", i+1), ClientURL: "http://" + FreePort(t)}
	}
	if pn != nil {
		pn.SetMembers(members)
	}
	for i, m := range members {
		m.Start(t, bin, "--data-dir", t.TempDir(), "--listen", m.ClientURL, "--name", m.Name,
			"--peer", "http://"+peers[i], "--listen-peer", "http://"+listens[i], "--initial-cluster", strings.Join(cluster, ","))
	}
	for _, m := range members {
		if err := m.WaitServing(); err != nil {
			for _, m := range members {
				m.Kill()
			}
			return nil, err
		}
	}
	return members, nil
}

// Start runs the member's process as bin args; it is killed when the test ends. WaitServing
// tells when it serves.
func (m *EtcdMember) Start(t *testing.T, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder // read only after cmd.Wait, which waits for its copying
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready, exited := make(chan error, 1), make(chan struct{})
	m.Cmd, m.ready, m.Exited = cmd, ready, exited
	m.pid.Store(int64(cmd.Process.Pid))
	t.Cleanup(m.Kill)
	go func() {
		defer close(exited)
		s := bufio.NewScanner(out)
		served := false
		for s.Scan() {
			if !served && strings.HasPrefix(s.Text(), "ready ") {
				served = true
				ready <- nil
			}
		}
		err := cmd.Wait()
		if !served {
			ready <- fmt.Errorf("etcd member %s exited before serving (%v): %s", m.Name, err, strings.TrimSpace(stderr.String()))
		}
	}()
}

// WaitServing waits until the member's process, as last started, serves; an error says it
// exited first (with what it printed on stderr) or did not serve within 60 s.
func (m *EtcdMember) WaitServing() error {
	select {
	case err := <-m.ready:
		return err
	case <-time.After(60 * time.Second):
		return fmt.Errorf("etcd member %s did not serve within 60s", m.Name)
	}
}

// Kill kills the member's process, as last started, and waits for it to exit; it may be called
// more than once.
func (m *EtcdMember) Kill() {
	m.Cmd.Process.Signal(syscall.SIGCONT)
	m.Cmd.Process.Kill()
	<-m.Exited
}

// FaultCluster is StartEtcdCluster for a fault test, which -short skips.
func FaultCluster(t *testing.T) []*EtcdMember {
	t.Helper()
	if testing.Short() {
		t.Skip("runs an etcd cluster and zetcd as processes")
	}
	return StartEtcdCluster(t, nil)
}

// ZetcdOn runs a zetcd process in front of the members ms.
func ZetcdOn(t *testing.T, ms []*EtcdMember) *ZetcdProcess {
	t.Helper()
	return StartProcessArgs(t, FreePort(t), "--endpoints", ClusterEndpoints(ms))
}

// ClusterEndpoints is the members' client URLs, comma-separated, for zetcd's --endpoints.
func ClusterEndpoints(ms []*EtcdMember) string {
	var urls []string
	for _, m := range ms {
		urls = append(urls, m.ClientURL)
	}
	return strings.Join(urls, ",")
}

// ClusterLeader returns the member that leads the cluster now.
func ClusterLeader(t *testing.T, ms []*EtcdMember) *EtcdMember {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(ClusterEndpoints(ms), ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	var leader *EtcdMember
	testenv.Eventually(t, 10*time.Second, "an etcd leader", func() error {
		for _, m := range ms {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := cli.Status(ctx, m.ClientURL)
			cancel()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				leader = m
				return nil
			}
		}
		return errors.New("no member is the leader")
	})
	return leader
}
