package clients

import (
	"fmt"
	"strings"
	"testing"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// A Kafka 3.9 broker in ZooKeeper mode with zookeeper.set.acl=true and a DIGEST-MD5 JAAS
// Client section, against zetcd and a ZooKeeper configured alike: the broker starts and
// creates its znodes with sasl ACLs; a client without credentials cannot change them, one
// authenticated as the broker's user can; both servers agree on every ACL and answer.

// envKafkaLib names a directory of Kafka broker jars; default <module root>/.cache/kafka/lib
// (`make kafka`).
const envKafkaLib = "ZETCD_KAFKA_LIB"

func kafkaLib(t *testing.T) string { return jarDir(t, envKafkaLib, "kafka", "kafka_2.13-*.jar") }

// startKafka starts a broker against addr as SASL user kafka, with zookeeper.set.acl, and
// returns once it has registered /brokers/ids/0 and, as the controller, created /controller,
// /controller_epoch and /feature.
func startKafka(t *testing.T, lib, addr string) {
	t.Helper()
	b := launchKafka(t, lib, addr, kafkaOptions{
		ID:    0,
		Props: "zookeeper.set.acl=true\nzookeeper.session.timeout.ms=18000\n",
		JAAS:  "Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  username=\"kafka\"\n  password=\"kafkasecret\";\n};\n",
	})
	b.await(t, itest.ConnectRaw(t, addr), "/brokers/ids/0", "/controller", "/controller_epoch", "/feature")
}

// kafkaPaths are znodes a broker creates at start.
var kafkaPaths = []string{
	"/brokers", "/brokers/ids", "/brokers/ids/0", "/brokers/topics", "/cluster/id", "/controller",
	"/controller_epoch", "/config", "/config/topics", "/config/changes", "/admin", "/admin/delete_topics",
	"/isr_change_notification", "/latest_producer_id_block", "/feature",
}

// kafkaView is what an unauthenticated client and the broker's user see and may do there.
func kafkaView(t *testing.T, addr string) []string {
	var out []string
	anon := itest.ConnectRaw(t, addr)
	for _, p := range kafkaPaths {
		acl, code := anon.GetACL(p)
		var ids []string
		for _, a := range acl {
			ids = append(ids, fmt.Sprintf("%s:%s=%d", a.ID.Scheme, a.ID.ID, a.Perms))
		}
		set := anon.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: p, Version: 1 << 30}, &encoding.SetDataResponse{})
		create := anon.CreateACL(p+"/zetcd-test", itest.WorldACL(encoding.PermAll))
		out = append(out, fmt.Sprintf("%s getACL %v %v; anonymous setData %v, create %v", p, code, ids, set, create))
	}
	broker := itest.ConnectRaw(t, addr)
	broker.SaslLogin("kafka", "kafkasecret")
	// The version does not match: BadVersion says the ACL let the write through.
	for _, p := range []string{"/cluster/id", "/brokers/topics", "/config/changes"} {
		set := broker.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: p, Version: 1 << 30}, &encoding.SetDataResponse{})
		out = append(out, fmt.Sprintf("%s as kafka: setData %v", p, set))
	}
	broker.MustCreateACL("/brokers/topics/zetcd-test", itest.ACLOf(encoding.PermAll, "sasl", "kafka"))
	out = append(out, "create as kafka OK")
	return out
}

// TestSaslKafkaBroker: see the top of this file.
func TestSaslKafkaBroker(t *testing.T) {
	lib := kafkaLib(t)
	views := map[string][]string{}
	for _, srv := range []struct {
		name  string
		start func(testing.TB, testenv.ServerOptions) string
	}{{"zetcd", testenv.StartZetcdWith}, {"zookeeper", testenv.StartZooKeeperWith}} {
		t.Run(srv.name, func(t *testing.T) {
			addr := srv.start(t, testenv.ServerOptions{SASL: &testenv.SASLOptions{Users: map[string]string{"kafka": "kafkasecret"}}})
			startKafka(t, lib, addr)
			views[srv.name] = kafkaView(t, addr)
			for _, l := range views[srv.name] {
				t.Log(l)
			}
		})
	}
	z, k := views["zetcd"], views["zookeeper"]
	if len(z) == 0 || len(k) == 0 {
		return
	}
	for i := range z {
		if i >= len(k) || z[i] != k[i] {
			t.Errorf("zetcd:     %s\nZooKeeper: %s", z[i], k[min(i, len(k)-1)])
		}
	}
	sasl := 0
	for _, l := range k {
		if strings.Contains(l, "sasl:kafka=31") {
			sasl++
		}
	}
	if sasl == 0 {
		t.Error("no znode has the broker's sasl ACL")
	}
}
