"""kazoo's SASL client against a server: prints one line per step, so that a test can compare
what zetcd and ZooKeeper answer.

    python kazoo_sasl.py <host:port> <owner|other|failed> <path> <mechanism> [user password]

kazoo reports a session as connected before its SASL exchange, and a failed exchange then
moves it to AUTH_FAILED from its connection thread. What start() and a first request return
depends on which of kazoo's two threads runs first, for any server: start() raises
KazooTimeoutError when the failure is processed before the caller's thread wakes; a request
queued during the exchange is dropped with the session's queue and never answered. So this
script follows the client's states, not start(): "start ok" once the session is established,
and AuthFailedError for a request made when the client has moved to AUTH_FAILED.
"""
import logging
import sys
import threading

from kazoo.client import KazooClient
from kazoo.exceptions import AuthFailedError
from kazoo.protocol.states import KeeperState
from kazoo.security import make_acl

logging.basicConfig(level=logging.CRITICAL)

WAIT = 60  # seconds; bounds a hang, not a speed


def step(name, f):
    try:
        print(name, f(), flush=True)
    except Exception as e:  # the exception's class is the answer
        print(name, type(e).__name__, flush=True)


def main():
    addr, mode, path, mech = sys.argv[1:5]
    sasl = None
    if mech != "none":
        sasl = {"mechanism": mech, "username": sys.argv[5], "password": sys.argv[6]}
    zk = KazooClient(hosts=addr, sasl_options=sasl, timeout=10, connection_retry={"max_tries": 0})
    connected, auth_failed = threading.Event(), threading.Event()
    woken = threading.Event()  # set by a request's answer or by AUTH_FAILED

    def on_state(_):
        # Listeners run in the connection thread right after the client's KeeperState moved.
        state = zk.client_state
        if state in (KeeperState.CONNECTED, KeeperState.CONNECTED_RO):
            connected.set()
        elif state == KeeperState.AUTH_FAILED:
            auth_failed.set()
            woken.set()

    zk.add_listener(on_state)
    zk.start_async()
    if not connected.wait(WAIT):
        print("start no session", flush=True)
        zk.stop()
        return
    print("start ok", flush=True)

    def call(f_async):
        woken.clear()
        result = f_async()
        result.rawlink(lambda _: woken.set())
        woken.wait(WAIT)
        if auth_failed.is_set():
            # The session's SASL exchange failed (kazoo sends no request before it ends). kazoo
            # then answers the request AuthFailedError, or ConnectionClosedError once its
            # connection thread has stopped, or drops it with its queue: a race between its
            # own threads, whatever the server.
            raise AuthFailedError()
        return result.get(timeout=WAIT)

    if mode == "owner":
        acl = [make_acl("sasl", sys.argv[5], all=True), make_acl("world", "anyone", read=True)]
        step("create", lambda: call(lambda: zk.create_async(path, b"v", acl=acl)))
        step("getACL", lambda: " ".join(f"{a.id.scheme}:{a.id.id}={a.perms}" for a in call(lambda: zk.get_acls_async(path))[0]))
        step("setData", lambda: call(lambda: zk.set_async(path, b"w")).version)
    elif mode == "other":
        step("setData", lambda: call(lambda: zk.set_async(path, b"x")).version)
        step("getData", lambda: call(lambda: zk.get_async(path))[0].decode())
    else:
        step("exists", lambda: call(lambda: zk.exists_async("/")) is not None)
    zk.stop()


main()
