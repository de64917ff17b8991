// Package clients runs real ZooKeeper clients and applications against zetcd and, with the same
// expected output, against a real ZooKeeper: the Java client (zkCli, watches, SASL, TLS), the
// C client, kazoo (Python), node-zookeeper-client, Apache Curator's recipes and Kafka brokers.
// Each test skips when its client is not installed (make zookeeper, kafka, curator, node), unless
// ZETCD_REQUIRE_ZOOKEEPER or ZETCD_REQUIRE_CLIENTS asks for it. It has no non-test code.
package clients
