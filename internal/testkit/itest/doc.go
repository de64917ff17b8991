// Package itest holds the helpers that integration, integration/faults and integration/clients
// share: RawClient, a wire-level ZooKeeper client built on the encoding package for what
// go-zookeeper cannot send, with one method per request the tests make; ZetcdProcess and
// StartProcessArgs, the zetcd binary run as a process; the etcd cluster, TCP partition and
// signal helpers of the fault tests (EtcdMember, FaultCluster, PeerNet); the SASL DIGEST-MD5
// client side (DigestClient, SaslLogin); a test PKI (NewPKI); Scrape for /metrics;
// Migration, a ZooKeeper and a zetcd process in migration mode with its cutover; and
// ReportViolations.
//
// It is test tooling: only tests import it. Each helper takes the test's testing.TB and fails
// the test itself, and waits for conditions through testenv.Eventually.
package itest
