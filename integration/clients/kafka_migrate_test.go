package clients

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
)

// A Kafka cluster moved from a ZooKeeper ensemble to zetcd by live migration (docs/migration.md,
// "Migration mode", "Relaying sessions", "Cutover"), with real processes throughout: three
// ZooKeeper 3.9 servers, three Kafka 3.9 brokers in ZooKeeper mode, the zetcd binary with its
// embedded etcd, and a producer and a consumer (testdata/KafkaMigration.java).

// kafkaMigrationProps configure the three brokers: a topic's data on all three, acknowledged by
// two at least; no leadership moved but by the restarts; few threads and small buffers, as the
// machine is small.
const kafkaMigrationProps = `zookeeper.session.timeout.ms=18000
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
auto.leader.rebalance.enable=false
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=2
num.replica.fetchers=1
background.threads=2
num.recovery.threads.per.data.dir=1
log.cleaner.dedupe.buffer.size=8388608
`

// kafkaMigrationJVM bound each broker's heap and the cores it sizes its pools by.
var kafkaMigrationJVM = []string{"-Xms256m", "-Xmx384m", "-XX:ActiveProcessorCount=2"}

const (
	kafkaMigrationTopic = "zetcd-migration"       // KafkaMigration.java's TOPIC, 3 partitions
	kafkaMigrationLater = "zetcd-migration-later" // and LATER, made after the cutover
)

// kafkaZnodes are the znodes that show whether a broker lost its session or the controller
// changed: a broker whose session ends registers again under a new one, and a new controller
// increments /controller_epoch.
type kafkaZnodes struct {
	Owners          [3]int64 // /brokers/ids/N's ephemeralOwner
	Czxids          [3]int64 // and czxid: the broker's epoch, which the controller holds
	Controller      string   // /controller's data: the broker and the time it was elected
	ControllerOwner int64
	Epoch           string // /controller_epoch's data
	EpochVersion    int32
}

func (k kafkaZnodes) String() string {
	return fmt.Sprintf("brokers' sessions %#x, czxids %#x; /controller %s owned by %#x; /controller_epoch %s (version %d)",
		k.Owners, k.Czxids, k.Controller, k.ControllerOwner, k.Epoch, k.EpochVersion)
}

// readKafkaZnodes reads kafkaZnodes through c.
func readKafkaZnodes(c *zk.Conn) (kafkaZnodes, error) {
	var k kafkaZnodes
	for i := range k.Owners {
		_, st, err := c.Get(fmt.Sprintf("/brokers/ids/%d", i))
		if err != nil {
			return k, fmt.Errorf("/brokers/ids/%d: %w", i, err)
		}
		k.Owners[i], k.Czxids[i] = st.EphemeralOwner, st.Czxid
	}
	data, st, err := c.Get("/controller")
	if err != nil {
		return k, fmt.Errorf("/controller: %w", err)
	}
	k.Controller, k.ControllerOwner = string(data), st.EphemeralOwner
	data, st, err = c.Get("/controller_epoch")
	if err != nil {
		return k, fmt.Errorf("/controller_epoch: %w", err)
	}
	k.Epoch, k.EpochVersion = string(data), st.Version
	return k, nil
}

// mustKafkaZnodes reads kafkaZnodes, again while c reconnects.
func mustKafkaZnodes(t *testing.T, c *zk.Conn) kafkaZnodes {
	t.Helper()
	var k kafkaZnodes
	testenv.Eventually(t, 30*time.Second, "reading the brokers' znodes", func() (err error) {
		k, err = readKafkaZnodes(c)
		return err
	})
	return k
}

// fullIsr says why the topic's partitions do not all have the three brokers in their ISR, as
// the controller writes it in each partition's state znode; nil if they do.
func fullIsr(c *zk.Conn, topic string, partitions int) error {
	for p := range partitions {
		path := fmt.Sprintf("/brokers/topics/%s/partitions/%d/state", topic, p)
		data, _, err := c.Get(path)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		var state struct {
			ISR []int `json:"isr"`
		}
		if err := json.Unmarshal(data, &state); err != nil {
			return fmt.Errorf("%s holds %q: %w", path, data, err)
		}
		if len(state.ISR) != 3 {
			return fmt.Errorf("%s: isr %v", path, state.ISR)
		}
	}
	return nil
}

// stopKafka stops a broker as an operator's rolling restart does (SIGTERM: a controlled
// shutdown, its partitions' leadership handed over, its session closed) and waits until it
// has exited.
func stopKafka(t *testing.T, b *kafkaBroker) {
	t.Helper()
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(time.Minute):
		t.Fatalf("broker %d still running a minute after SIGTERM; its log:\n%s", b.id, b.tail())
	}
}

// relayed says whether /migrate lists session id as relayed and connected.
func relayed(s itest.MigrationStatus, id int64) bool {
	return slices.ContainsFunc(s.Relayed, func(r itest.RelayedSession) bool { return r.ID == fmt.Sprintf("%#x", id) && r.Connected })
}

// producerMark asks KafkaMigration.java how many records the brokers have acknowledged so far,
// and logs it under what.
func producerMark(t *testing.T, client *pausedClient, what string) int {
	t.Helper()
	if _, err := io.WriteString(client.stdin, what+"\n"); err != nil {
		t.Fatal(err)
	}
	line := client.untilReady()
	m := regexp.MustCompile(`acknowledged (\d+) failed (\d+)$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("java KafkaMigration: %q", line)
	}
	t.Logf("producer: %s", line)
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestKafkaMigration: a Kafka cluster of three brokers on a three-server ZooKeeper ensemble, a
// topic on all three with min.insync.replicas=2 and a producer with acks=all sending throughout;
// zetcd in migration mode copies the ensemble; the brokers are restarted one at a time onto
// zetcd (their sessions then relayed to ZooKeeper); the cutover moves them to zetcd, zkctl diff
// finds the two trees equal, and the ensemble is stopped. No broker loses its session at the
// cutover (each /brokers/ids/N keeps its ephemeralOwner, zetcd's cons shows each broker's
// session connected, and each broker's ZooKeeper client logs one disconnection at most and no
// expiration), the cutover causes no controller election (/controller and /controller_epoch
// unchanged), every acknowledged record is read back, and a topic created after the cutover
// gets its znodes, its partition's state written by the controller, and loses them when
// deleted. Each /brokers/ids/N shows the czxid it had on ZooKeeper (the broker's epoch), so a
// broker restarted after the cutover rejoins every ISR. zetcd logs no error.
func TestKafkaMigration(t *testing.T) {
	lib := kafkaLib(t)
	ensemble := zkserver.StartEnsemble(t, 3, zkserver.Options{})
	var zkAddrs []string
	for _, s := range ensemble {
		zkAddrs = append(zkAddrs, s.Addr)
	}
	zkConnect := strings.Join(zkAddrs, ",")
	brokers := make([]*kafkaBroker, 3)
	for i := range brokers {
		brokers[i] = launchKafka(t, lib, zkConnect, kafkaOptions{ID: i, Props: kafkaMigrationProps, JVM: kafkaMigrationJVM})
	}
	onZooKeeper := testenv.ConnectServers(t, zkAddrs, nil)
	for _, b := range brokers {
		awaitZnodes(t, b, onZooKeeper, fmt.Sprintf("/brokers/ids/%d", b.id), "/controller")
	}
	var bootstrap []string
	for _, b := range brokers {
		bootstrap = append(bootstrap, b.addr)
	}
	client, _ := startPaused(t, javaProgram(t, t.TempDir(), "KafkaMigration.java", []string{lib}, nil, strings.Join(bootstrap, ",")), "java KafkaMigration")
	producerMark(t, client, "brokers on ZooKeeper")

	// zetcd copies the ensemble; the test's reads go through it from here on, relayed to
	// ZooKeeper until the cutover, so that ZooKeeper has no client the cutover would leave.
	m := itest.StartMigration(t, itest.MigrationOptions{ZooKeeper: ensemble})
	z := m.Zetcd
	m.WaitCaughtUp(t, 0)
	onZooKeeper.Close()
	c := testenv.Connect(t, z.Addr)

	// The rolling restart, the controller last: one election then, none at the cutover.
	first := controllerOf(t, mustKafkaZnodes(t, c))
	order := append(slices.DeleteFunc([]int{0, 1, 2}, func(i int) bool { return i == first }), first)
	logFrom := make([]int64, len(brokers)) // where each broker's log on zetcd begins
	// restart restarts broker i onto zetcd, its log on zetcd beginning where it is now.
	restart := func(i int) {
		stopKafka(t, brokers[i])
		fi, err := os.Stat(brokers[i].log)
		testenv.Must(t, err)
		logFrom[i] = fi.Size()
		brokers[i] = launchKafka(t, lib, z.Addr, kafkaOptions{ID: i, Props: kafkaMigrationProps, JVM: kafkaMigrationJVM, Restart: brokers[i]})
	}
	for _, i := range order {
		old := mustKafkaZnodes(t, c).Owners[i]
		restart(i)
		brokers[i].awaitThat(t, fmt.Sprintf("broker %d registered again, relayed, and in every ISR", i), func() error {
			k, err := readKafkaZnodes(c)
			switch {
			case err != nil:
				return err
			case k.Owners[i] == old:
				return fmt.Errorf("/brokers/ids/%d still owned by %#x", i, old)
			case !relayed(m.Status(t), k.Owners[i]):
				return fmt.Errorf("/brokers/ids/%d's session %#x is not relayed through zetcd", i, k.Owners[i])
			}
			return fullIsr(c, kafkaMigrationTopic, 3)
		})
		producerMark(t, client, fmt.Sprintf("broker %d restarted onto zetcd", i))
	}

	t.Cleanup(func() {
		for i, b := range brokers {
			if expired, disconnected := sessionEvents(t, b, logFrom[i]); expired > 0 || disconnected > 1 {
				t.Errorf("broker %d on zetcd: its ZooKeeper client saw %d expirations and %d disconnections; its log:\n%s", i, expired, disconnected, b.tail())
			}
		}
	})

	m.WaitCaughtUp(t, 0)
	before := mustKafkaZnodes(t, c)
	t.Logf("before the cutover: %s", before)
	m.Cutover(t)
	status := m.Status(t)
	t.Logf("/migrate's cutover: %+v", status.Cutover)
	for i, id := range before.Owners {
		if !slices.Contains(status.Cutover.TakenOver, fmt.Sprintf("%#x", id)) {
			t.Errorf("broker %d's session %#x is not among the sessions taken over", i, id)
		}
	}
	acked := producerMark(t, client, "cutover done")
	// The copy is ZooKeeper's tree, the brokers' registrations with their owners included: the
	// relayed sessions stay on ZooKeeper, without connections, until their timeouts.
	itest.DiffTrees(t, zkAddrs[0], z.Addr)
	for _, s := range ensemble {
		s.Stop()
	}

	// Each broker resumes its own session on zetcd.
	if err := connectedTo(z.Addr, before.Owners[:]); err != nil {
		t.Error(err)
	}
	if after := mustKafkaZnodes(t, c); after != before {
		t.Errorf("after the cutover: %s\nbefore:             %s", after, before)
	}
	time.Sleep(5 * time.Second) // the producer goes on without ZooKeeper
	if n := producerMark(t, client, "ZooKeeper stopped"); n <= acked {
		t.Errorf("no record acknowledged after the cutover: %d, then %d", acked, n)
	}

	// Every acknowledged record is read back; a topic comes and goes.
	client.goOn()
	created := client.untilReady()
	for _, l := range client.lines {
		t.Logf("java KafkaMigration: %s", l)
	}
	consumed := client.lines[slices.IndexFunc(client.lines, func(l string) bool { return strings.HasPrefix(l, "consumed ") })]
	if m := regexp.MustCompile(`acknowledged (\d+), missing 0$`).FindStringSubmatch(consumed); m == nil || m[1] == "0" {
		t.Errorf("java KafkaMigration: %q, want every acknowledged record read back", consumed)
	}
	later := []string{"/brokers/topics/" + kafkaMigrationLater, "/config/topics/" + kafkaMigrationLater}
	if created != "ready created "+kafkaMigrationLater {
		t.Errorf("java KafkaMigration: %q", created)
	}
	// zetcd's zxids are above every zxid ZooKeeper gave out.
	var zkLast int64
	if _, err := fmt.Sscanf(status.Cutover.ZooKeeperZxid, "0x%x", &zkLast); err != nil || zkLast == 0 {
		t.Errorf("/migrate's cutover: zookeeperZxid %q", status.Cutover.ZooKeeperZxid)
	}
	for _, p := range later {
		if ok, st, err := c.Exists(p); err != nil || !ok || st.Czxid <= zkLast {
			t.Errorf("%s after the topic's creation: %v %+v %v; ZooKeeper's last zxid %#x", p, ok, st, err, zkLast)
		}
	}
	if err := fullIsr(c, kafkaMigrationLater, 1); err != nil {
		t.Errorf("after the topic's creation: %v", err)
	}
	lines := client.resume()
	if last := lines[len(lines)-1]; last != "deleted "+kafkaMigrationLater {
		t.Errorf("java KafkaMigration: %q", last)
	}
	testenv.Eventually(t, time.Minute, "the deleted topic's znodes gone", func() error {
		for _, p := range append(later, "/admin/delete_topics/"+kafkaMigrationLater) {
			if ok, _, err := c.Exists(p); err != nil || ok {
				return fmt.Errorf("%s: %v %v", p, ok, err)
			}
		}
		return nil
	})
	if after := mustKafkaZnodes(t, c); after != before {
		t.Errorf("at the end: %s\nbefore:     %s", after, before)
	}

	// A broker restarted after the cutover rejoins every ISR: the controller holds the other
	// brokers' epochs from ZooKeeper, and zetcd shows the same czxids.
	restarted := (controllerOf(t, before) + 1) % len(brokers)
	restart(restarted)
	brokers[restarted].awaitThat(t, fmt.Sprintf("broker %d restarted after the cutover, registered again and in every ISR", restarted), func() error {
		k, err := readKafkaZnodes(c)
		switch {
		case err != nil:
			return err
		case k.Owners[restarted] == before.Owners[restarted]:
			return fmt.Errorf("/brokers/ids/%d still owned by %#x", restarted, before.Owners[restarted])
		}
		return fullIsr(c, kafkaMigrationTopic, 3)
	})
	after := mustKafkaZnodes(t, c)
	for i := range brokers {
		if i != restarted && (after.Owners[i] != before.Owners[i] || after.Czxids[i] != before.Czxids[i]) {
			t.Errorf("broker %d after broker %d's restart: %s\nbefore the cutover: %s", i, restarted, after, before)
		}
	}
	if after.Czxids[restarted] <= zkLast {
		t.Errorf("broker %d's registration after the cutover: czxid %#x, not above ZooKeeper's last zxid %#x", restarted, after.Czxids[restarted], zkLast)
	}
	if strings.Contains(z.LogText(), `"level":"error"`) {
		t.Error("zetcd logged errors")
	}
}

// connectedTo waits up to a minute until the cons of the server at addr lists every session of
// ids, and says which it does not list if it does not.
func connectedTo(addr string, ids []int64) error {
	deadline := time.Now().Add(time.Minute)
	for {
		cons, err := zkserver.FourLetterWord(addr, "cons", 5*time.Second)
		if err == nil {
			var missing []string
			for _, id := range ids {
				if !strings.Contains(cons, fmt.Sprintf("sid=%#x,", id)) {
					missing = append(missing, fmt.Sprintf("%#x", id))
				}
			}
			if len(missing) == 0 {
				return nil
			}
			err = fmt.Errorf("sessions %v not in %s's cons:\n%s", missing, addr, cons)
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sessionEvents counts the expirations and the disconnections of its session that a broker's
// ZooKeeper client logged (ZooKeeper's ClientCnxn, at WARN) from byte from of its log on.
func sessionEvents(t *testing.T, b *kafkaBroker, from int64) (expired, disconnected int) {
	t.Helper()
	out, err := os.ReadFile(b.log)
	testenv.Must(t, err)
	for _, l := range strings.Split(string(out[from:]), "\n") {
		switch {
		case strings.Contains(l, "org.apache.zookeeper.ClientCnxn") && strings.Contains(l, "has expired"):
			expired++
		case strings.Contains(l, "org.apache.zookeeper.ClientCnxn") && strings.Contains(l, "Closing socket connection"):
			disconnected++
		}
	}
	return expired, disconnected
}

// controllerOf is the broker id k's /controller names.
func controllerOf(t *testing.T, k kafkaZnodes) int {
	t.Helper()
	var v struct {
		BrokerID int `json:"brokerid"`
	}
	if err := json.Unmarshal([]byte(k.Controller), &v); err != nil {
		t.Fatalf("/controller holds %q: %v", k.Controller, err)
	}
	return v.BrokerID
}

// awaitZnodes waits until every path exists (c reads them), or fails the test with the broker's
// log if it exits or two minutes pass.
func awaitZnodes(t *testing.T, b *kafkaBroker, c *zk.Conn, paths ...string) {
	t.Helper()
	b.awaitThat(t, fmt.Sprintf("broker %d: %v all there", b.id, paths), func() error {
		for _, p := range paths {
			if ok, _, err := c.Exists(p); err != nil || !ok {
				return fmt.Errorf("%s: %v %v", p, ok, err)
			}
		}
		return nil
	})
}
