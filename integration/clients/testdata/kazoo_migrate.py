"""kazoo across a migration's cutover, for integration/clients/migrate_kazoo_test.go.

    python kazoo_migrate.py <host:port of a zetcd in migration mode>

A session creates an ephemeral, sets a one-time data watch, and watches with kazoo's
DataWatch (a node and an absent node) and ChildrenWatch; a second session, the writer, changes
nodes before. The script prints "ready" and the first session's id, and waits for a line on
stdin while the test cuts over and stops ZooKeeper. It then reads again, lets the writer change
the watched nodes one at a time, and prints what a kazoo user relies on, in lines that do not
depend on timing.
"""
import logging
import queue
import sys
import time

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

logging.basicConfig(level=logging.CRITICAL)

WAIT = 60  # seconds; bounds a hang, not a speed
SETTLE = 0.5  # seconds for a call that should not come to show up


def client(addr, states):
    zk = KazooClient(hosts=addr, timeout=15)
    zk.add_listener(states.append)
    zk.start(timeout=WAIT)
    return zk


def newest(*stats):
    return max(max(s.czxid, s.mzxid, s.pzxid) for s in stats)


def calls(q, n):
    """The n calls q is given, then any more within SETTLE, sorted: calls of different watches
    made for one change come in any order."""
    got = [q.get(timeout=WAIT) for _ in range(n)]
    time.sleep(SETTLE)
    got += [q.get() for _ in range(q.qsize())]
    return sorted(got)


def main():
    addr = sys.argv[1]
    states, writer_states = [], []
    zk = client(addr, states)
    writer = client(addr, writer_states)
    session = zk.client_id[0]

    writer.create("/kzm/data", b"v0", makepath=True)
    for i in range(1, 4):
        writer.set("/kzm/data", b"v%d" % i)
    zk.create("/kzm/eph", b"mine", ephemeral=True)
    raw, watched = queue.Queue(), queue.Queue()
    _, before = zk.get("/kzm/data", watch=lambda e: raw.put("%s %s" % (e.type, e.path)))
    zk.DataWatch("/kzm/data", lambda d, st: watched.put("data %s" % d.decode()))
    zk.DataWatch("/kzm/absent", lambda d, st: watched.put("absent %s" % (d.decode() if d is not None else None)))
    zk.ChildrenWatch("/kzm", lambda c: watched.put("children %s" % sorted(c)))
    seen = newest(before, zk.exists("/kzm"), zk.exists("/kzm/eph"))
    print("watching", calls(watched, 3), flush=True)

    print("ready %#x" % session, flush=True)
    sys.stdin.readline()

    deadline = time.monotonic() + WAIT
    while zk.state != KazooState.CONNECTED and time.monotonic() < deadline:
        time.sleep(0.05)
    data, after = zk.get("/kzm/data")
    print("read data=%s sameVersion=%s mzxidNotOlder=%s" % (
        data.decode(), after.version == before.version, after.mzxid >= before.mzxid), flush=True)
    # kazoo fires its one-time watches with a NONE event at any disconnection and forgets them
    # (KazooClient._reset_watchers); DataWatch and ChildrenWatch read and watch again.
    time.sleep(SETTLE)
    print("raw watch at the disconnection", [raw.get() for _ in range(raw.qsize())], flush=True)
    print("calls with nothing changed", [watched.get() for _ in range(watched.qsize())], flush=True)

    eph = writer.exists("/kzm/eph")
    print("ephemeral kept=%s" % (eph is not None and eph.ephemeralOwner == session), flush=True)
    stat = writer.set("/kzm/data", b"after")
    print("write after zxidAbove=%s" % (stat.mzxid > seen), flush=True)
    print("calls for setData", calls(watched, 1), flush=True)
    writer.create("/kzm/new")
    print("calls for a create", calls(watched, 1), flush=True)
    writer.create("/kzm/absent", b"here")
    print("calls for the absent node's create", calls(watched, 2), flush=True)
    print("session same=%s" % (zk.client_id[0] == session), flush=True)
    print("states", [str(s) for s in states], [str(s) for s in writer_states], flush=True)
    zk.stop()
    writer.stop()
    zk.close()
    writer.close()


if __name__ == "__main__":
    main()
