"""kazoo's SASL client against a server: prints one line per step, so that a test can compare
what zetcd and ZooKeeper answer.

    python kazoo_sasl.py <host:port> <owner|other|failed> <path> <mechanism> [user password]
"""
import logging
import sys

from kazoo.client import KazooClient
from kazoo.security import make_acl, make_digest_acl_credential

logging.basicConfig(level=logging.CRITICAL)


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
    try:
        zk.start(timeout=10)
        print("start ok", flush=True)
    except Exception as e:
        print("start", type(e).__name__, flush=True)
        zk.stop()
        return
    if mode == "owner":
        acl = [make_acl("sasl", sys.argv[5], all=True), make_acl("world", "anyone", read=True)]
        step("create", lambda: zk.create(path, b"v", acl=acl))
        step("getACL", lambda: " ".join(f"{a.id.scheme}:{a.id.id}={a.perms}" for a in zk.get_acls(path)[0]))
        step("setData", lambda: zk.set(path, b"w").version)
    elif mode == "other":
        step("setData", lambda: zk.set(path, b"x").version)
        step("getData", lambda: zk.get(path)[0].decode())
    else:
        step("exists", lambda: zk.exists("/") is not None)
    zk.stop()


main()
