package clients

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
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

// Kafka 3.9 brokers in ZooKeeper mode as processes of their own (kafka.Kafka from the jars of
// `make kafka`, with ZooKeeper 3.9's client).

// kafkaOptions configure one broker.
type kafkaOptions struct {
	ID    int
	Props string // server.properties lines beyond the id, listener, log directory and zookeeper.connect
	JAAS  string // a JAAS file's text (its Client section logs the broker in); empty: none
	// JVM are options after the defaults: a later -Xmx replaces the default heap's bound.
	JVM []string
	// Restart, if set, is a broker that has exited: the new one takes over its listener and
	// directory (its logs, the partitions' data).
	Restart *kafkaBroker
}

// kafkaBroker is a running broker; its JVM is killed at cleanup.
type kafkaBroker struct {
	id     int
	addr   string // its PLAINTEXT listener
	dir    string // its configuration, data and log
	cmd    *exec.Cmd
	exited chan struct{}
	log    string // its stdout and stderr
}

// launchKafka starts a broker against the ZooKeeper servers zkConnect and returns without waiting
// for it (await).
func launchKafka(t *testing.T, lib, zkConnect string, o kafkaOptions) *kafkaBroker {
	t.Helper()
	dir, addr := t.TempDir(), ""
	if o.Restart != nil {
		dir, addr = o.Restart.dir, o.Restart.addr
	} else {
		addr = itest.FreePort(t)
	}
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg := write("server.properties", fmt.Sprintf("broker.id=%d\nlisteners=PLAINTEXT://%s\nlog.dirs=%s\nzookeeper.connect=%s\n%s",
		o.ID, addr, filepath.Join(dir, "logs"), zkConnect, o.Props))
	jvm := append([]string{"-Xmx512m", "-XX:+UseSerialGC", "-Dzookeeper.fips-mode=false"}, o.JVM...)
	if o.JAAS != "" {
		jvm = append(jvm, "-Djava.security.auth.login.config="+write("kafka.jaas", o.JAAS))
	}
	cmd := javaProgram(t, dir, "kafka.Kafka", []string{lib}, jvm, cfg)
	b := &kafkaBroker{id: o.ID, addr: addr, dir: dir, cmd: cmd, exited: make(chan struct{}), log: filepath.Join(dir, "kafka.log")}
	logFile, err := os.OpenFile(b.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(b.exited) }()
	t.Cleanup(b.kill)
	return b
}

// await waits until every path exists (c reads them), or fails the test with the broker's log
// if it exits or two minutes pass.
func (b *kafkaBroker) await(t *testing.T, c *itest.RawClient, paths ...string) {
	t.Helper()
	b.awaitThat(t, fmt.Sprintf("broker %d: %v all there", b.id, paths), func() error {
		if !allExist(c, paths) {
			return notThere{b}
		}
		return nil
	})
}

// awaitThat waits until there returns nil, or fails the test with the broker's log if it exits
// or two minutes pass.
func (b *kafkaBroker) awaitThat(t *testing.T, what string, there func() error) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, what, func() error {
		select {
		case <-b.exited:
			t.Fatalf("broker %d exited; its log:\n%s", b.id, b.tail())
		default:
		}
		return there()
	})
}

// notThere is await's error: it reads the broker's log only when the test fails.
type notThere struct{ b *kafkaBroker }

func (e notThere) Error() string { return "not all there; the broker's log:\n" + e.b.tail() }

func anyExist(c *itest.RawClient, paths []string) bool {
	return slices.ContainsFunc(paths, c.Exists)
}

func allExist(c *itest.RawClient, paths []string) bool {
	for _, p := range paths {
		if !c.Exists(p) {
			return false
		}
	}
	return true
}

// kill kills the broker's JVM (SIGKILL: no controlled shutdown, its session left to expire) and
// waits for it to exit. Idempotent.
func (b *kafkaBroker) kill() {
	b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.exited
}

// tail is the end of the broker's log.
func (b *kafkaBroker) tail() string {
	out, _ := os.ReadFile(b.log)
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// kafkaController is the broker id /controller names.
func kafkaController(t *testing.T, c *itest.RawClient) int {
	t.Helper()
	_, data := c.Stat("/controller")
	var v struct {
		BrokerID int `json:"brokerid"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("/controller holds %q: %v", data, err)
	}
	return v.BrokerID
}

// kafkaProducedAround is what KafkaFailover.java prints first in either mode: the topic, and the
// records produced before and after its pause.
var kafkaProducedAround = []string{"topic partitions=2 replicas=2", "produced 100", "ready", "produced 100"}

// kafkaPairProps configure the brokers of startKafkaPair: sessions of 6 s, so that a killed
// broker's ends soon; internal topics on one replica.
const kafkaPairProps = "zookeeper.session.timeout.ms=6000\noffsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n"

// startKafkaPair starts brokers 0 and 1, with zookeeper.connect zk0 and zk1, and waits until
// both are registered and one is the controller (a session of observe's reads the znodes).
func startKafkaPair(t *testing.T, lib string, observe func() *itest.RawClient, zk0, zk1 string) []*kafkaBroker {
	t.Helper()
	brokers := []*kafkaBroker{
		launchKafka(t, lib, zk0, kafkaOptions{ID: 0, Props: kafkaPairProps}),
		launchKafka(t, lib, zk1, kafkaOptions{ID: 1, Props: kafkaPairProps}),
	}
	c := observe()
	for _, b := range brokers {
		b.await(t, c, fmt.Sprintf("/brokers/ids/%d", b.id), "/controller")
	}
	return brokers
}

// TestKafkaFailover: two Kafka brokers, each on a zetcd of its own in front of one etcd, hold a
// topic replicated on both. A client produces 100 records with acks=all; the controller broker
// is killed (SIGKILL, so its session ends only by expiring); the other broker takes over as
// controller and as leader of every partition, through watches one zetcd fires on changes the
// other made; the client produces 100 more and reads all 200 back. The killed broker restarts
// on its data and rejoins every partition's ISR; a topic config change and the topic's deletion
// reach the brokers through the znodes Kafka writes for them.
func TestKafkaFailover(t *testing.T) {
	lib := kafkaLib(t)
	cluster := startEtcd(t)
	zetcds := []*testenv.Zetcd{testenv.StartZetcdOn(t, cluster, testenv.Options{}), testenv.StartZetcdOn(t, cluster, testenv.Options{})}
	observe := kafkaObserver(t, zetcds[0].Addr)
	brokers := startKafkaPair(t, lib, observe, zetcds[0].Addr, zetcds[1].Addr)

	cmd := javaProgram(t, t.TempDir(), "KafkaFailover.java", []string{lib}, nil, brokers[0].addr+","+brokers[1].addr, "failover")
	client, _ := startPaused(t, cmd, "java KafkaFailover")

	dead := kafkaController(t, observe())
	if dead != 0 && dead != 1 {
		t.Fatalf("/controller names broker %d", dead)
	}
	survivor := 1 - dead
	brokers[dead].kill()
	t.Logf("killed broker %d, the controller", dead)
	client.proceed()
	c := observe()
	if got := kafkaController(t, c); got != survivor {
		t.Errorf("/controller names broker %d, want the survivor %d", got, survivor)
	}
	brokerIDs(t, c, survivor)

	// The broker comes back on its own data, on the zetcd it had.
	brokers[dead] = launchKafka(t, lib, zetcds[dead].Addr, kafkaOptions{ID: dead, Props: kafkaPairProps, Restart: brokers[dead]})
	brokers[dead].await(t, observe(), fmt.Sprintf("/brokers/ids/%d", dead))
	lines := client.resume()
	want := slices.Concat(kafkaProducedAround, []string{
		"after the kill: leaders on one broker, isr sizes [1]",
		"consumed 200 distinct 200",
		"ready",
		"after the restart: isr sizes [2]",
		"config retention.ms=12345",
		"deleted true",
	})
	wantLines(t, "java KafkaFailover", lines, want)
	c = observe()
	brokerIDs(t, c, 0, 1)
	// The brokers stop listing a topic before the controller has deleted its znodes.
	deleted := []string{"/brokers/topics/zetcd-failover", "/config/topics/zetcd-failover", "/admin/delete_topics/zetcd-failover"}
	testenv.Eventually(t, time.Minute, "the deleted topic's znodes gone", func() error {
		if anyExist(c, deleted) {
			return fmt.Errorf("some of %v still there", deleted)
		}
		return nil
	})
}

// brokerIDs checks that /brokers/ids lists exactly the brokers ids.
func brokerIDs(t *testing.T, c *itest.RawClient, ids ...int) {
	t.Helper()
	var resp encoding.GetChildrenResponse
	if code := c.MustCall(encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: "/brokers/ids"}, &resp); code != 0 {
		t.Fatalf("getChildren /brokers/ids: %v", code)
	}
	var want []string
	for _, id := range ids {
		want = append(want, fmt.Sprint(id))
	}
	slices.Sort(resp.Children)
	if !slices.Equal(resp.Children, want) {
		t.Errorf("/brokers/ids = %v, want %v", resp.Children, want)
	}
}

// TestFaultKafkaEtcdLeaderPaused: two Kafka brokers, on zetcd processes of their own in front of
// a three-member etcd cluster, hold a topic replicated on both; the etcd leader is paused (SIGSTOP)
// for 4 s, less than the brokers' session timeout, while a client produces. No broker loses its
// session (each broker's registration keeps its owner), the controller stays (same broker, same
// epoch), and every record produced before and after is read back.
func TestFaultKafkaEtcdLeaderPaused(t *testing.T) {
	ms := itest.FaultCluster(t)
	a, b := itest.ZetcdOn(t, ms), itest.ZetcdOn(t, ms)
	kafkaSurvives(t, kafkaObserver(t, a.Addr), a.Addr, b.Addr, func() {
		leader := itest.ClusterLeader(t, ms)
		leader.Signal(t, syscall.SIGSTOP)
		time.Sleep(4 * time.Second)
		leader.Signal(t, syscall.SIGCONT)
	})
}

// TestFaultKafkaZetcdKilled: the same brokers, each given two zetcd processes in its
// zookeeper.connect, as a deployment that scales zetcd out configures them; the zetcd the
// controller's session is on is killed (SIGKILL) while a client produces. The brokers' sessions
// on it resume on the other: none is lost, the controller stays, every record is read back. A
// third zetcd observes.
func TestFaultKafkaZetcdKilled(t *testing.T) {
	ms := itest.FaultCluster(t)
	zs := []*itest.ZetcdProcess{itest.ZetcdOn(t, ms), itest.ZetcdOn(t, ms)}
	addrs := []string{zs[0].Addr, zs[1].Addr}
	observe := kafkaObserver(t, itest.ZetcdOn(t, ms).Addr)
	both := strings.Join(addrs, ",")
	kafkaSurvives(t, observe, both, both, func() {
		st, _ := observe().Stat("/controller")
		i := serverOf(t, st.EphemeralOwner.String(), addrs)
		t.Logf("killing %s, which holds the controller's session %v", addrs[i], st.EphemeralOwner)
		zs[i].Kill()
	})
}

// kafkaSurvives starts two brokers (zookeeper.connect zk0 and zk1), has KafkaFailover.java produce
// around fault in its "pause" mode, and checks that the brokers kept their sessions and the
// controller (observe's connections read the znodes; they must not be on a server the fault
// takes away).
func kafkaSurvives(t *testing.T, observe func() *itest.RawClient, zk0, zk1 string, fault func()) {
	t.Helper()
	lib := kafkaLib(t)
	brokers := startKafkaPair(t, lib, observe, zk0, zk1)
	before := kafkaSessions(t, observe())
	t.Logf("before the fault: %s", before)
	cmd := javaProgram(t, t.TempDir(), "KafkaFailover.java", []string{lib}, nil, brokers[0].addr+","+brokers[1].addr, "pause")
	client, _ := startPaused(t, cmd, "java KafkaFailover")
	fault()
	wantLines(t, "java KafkaFailover", client.resume(), slices.Concat(kafkaProducedAround, []string{
		"after the pause: isr sizes [2]",
		"consumed 200 distinct 200",
	}))
	if after := kafkaSessions(t, observe()); after != before {
		t.Errorf("after the fault: %s\nbefore: %s", after, before)
	}
}

// kafkaObserver returns a function that opens a new session on addr for the test to read the
// znodes with. Each reading after a wait for the brokers or the client needs a new one: the test's
// raw connections do not ping, and one left idle for longer than its session timeout while a
// broker starts or the client runs is closed, by zetcd as by ZooKeeper.
func kafkaObserver(t *testing.T, addr string) func() *itest.RawClient {
	return func() *itest.RawClient {
		t.Helper()
		return itest.ConnectRaw(t, addr)
	}
}

// kafkaSessions says which sessions own the brokers' registrations and the controller's znode,
// which broker the controller is, and the controller epoch: it changes if a broker's session
// ends.
func kafkaSessions(t *testing.T, c *itest.RawClient) string {
	t.Helper()
	var owners []string
	for _, p := range []string{"/brokers/ids/0", "/brokers/ids/1", "/controller"} {
		st, _ := c.Stat(p)
		owners = append(owners, fmt.Sprintf("%s owned by %v", p, st.EphemeralOwner))
	}
	_, epoch := c.Stat("/controller_epoch")
	return fmt.Sprintf("%s; controller %d, epoch %s", strings.Join(owners, ", "), kafkaController(t, c), epoch)
}
