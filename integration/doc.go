// Package integration holds zetcd's end-to-end behaviour tests: real clients over real sockets
// against zetcd on an embedded etcd and, with the same expectations, against a real Apache
// ZooKeeper 3.9 (internal/testkit/zkserver), plus the differential tests that replay the same
// requests on both and compare the answers. It has no non-test code.
//
// The costlier tests live next to it: integration/faults (a multi-member etcd cluster whose
// members, and zetcd processes, are killed, paused, frozen and cut off; linearizability) and
// integration/clients (the Java, C, Python, Node.js clients and Kafka and Curator). The helpers
// they share are in internal/testkit/itest.
package integration
