"""kazoo with read_only=True against a server that serves read-only sessions now: prints one
line per step, and, after "waiting for read-write", waits for the client to be connected
read-write again (the test brings etcd's quorum back then) and writes.

    python kazoo_readonly.py <host:port> <path>

<path> holds "there" before the script starts.
"""
import logging
import sys
import time

from kazoo.client import KazooClient
from kazoo.exceptions import NotReadOnlyCallError
from kazoo.protocol.states import KeeperState

logging.basicConfig(level=logging.CRITICAL)

WAIT = 90  # seconds; bounds a hang, not a speed


def main():
    addr, path = sys.argv[1], sys.argv[2]
    zk = KazooClient(hosts=addr, read_only=True, timeout=10)
    zk.start(timeout=WAIT)
    # client_state is CONNECTED_RO when the ConnectResponse said read-only.
    print("state", zk.client_state, flush=True)
    data, _ = zk.get(path)
    print("get", data.decode(), flush=True)
    try:
        zk.create(path + "/new", b"x")
        print("create ok", flush=True)
    except NotReadOnlyCallError:
        print("create NotReadOnlyCallError", flush=True)
    print("waiting for read-write", flush=True)
    deadline = time.monotonic() + WAIT
    while zk.client_state != KeeperState.CONNECTED and time.monotonic() < deadline:
        time.sleep(0.2)
    print("state", zk.client_state, flush=True)
    zk.create(path + "/after", b"x")
    print("create after ok", flush=True)
    zk.stop()
    zk.close()


if __name__ == "__main__":
    main()
