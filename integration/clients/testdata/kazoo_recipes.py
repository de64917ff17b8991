"""kazoo's recipes against a server, for integration/kazoo_test.go: each step prints what a user of
the recipe relies on, in lines that do not depend on timing, so that zetcd's and ZooKeeper's
outputs can be compared line for line. A step that does not finish in time prints a FAIL line and
the script exits 1.

    python kazoo_recipes.py <host:port>
"""
import logging
import queue
import sys
import threading

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError
from kazoo.recipe.cache import TreeCache

logging.basicConfig(level=logging.CRITICAL)

WAIT = 30  # seconds any one wait may take
addr = sys.argv[1]
clients = []


def client():
    """A started client with a session of its own."""
    zk = KazooClient(hosts=addr, timeout=10)
    zk.start(timeout=WAIT)
    clients.append(zk)
    return zk


def run_all(fns):
    """Runs each function on a thread of its own and returns their results, in order."""
    results, errors = [None] * len(fns), []

    def run(i, fn):
        try:
            results[i] = fn()
        except Exception as e:  # reported below, on the main thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i, fn)) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(2 * WAIT)
        if t.is_alive():
            raise TimeoutError("a task did not finish")
    if errors:
        raise errors[0]
    return results


def take(step, events, n):
    """Prints the next n events of a queue, prefixed with step."""
    for _ in range(n):
        try:
            print(step, events.get(timeout=WAIT), flush=True)
        except queue.Empty:
            raise TimeoutError(step + ": no event")


def lock():
    """Four sessions take a Lock 20 times each and, holding it, increment a counter node
    read-modify-write guarded by its version: a second holder would fail the guard."""
    zks = [client() for _ in range(4)]
    zks[0].create("/kz/counter", b"0", makepath=True)
    holders, most, mu = [0], [0], threading.Lock()

    def work(zk):
        lk = zk.Lock("/kz/lock", "worker")
        for _ in range(20):
            with lk:
                with mu:
                    holders[0] += 1
                    most[0] = max(most[0], holders[0])
                data, st = zk.get("/kz/counter")
                zk.set("/kz/counter", str(int(data) + 1).encode(), version=st.version)
                with mu:
                    holders[0] -= 1

    run_all([lambda zk=zk: work(zk) for zk in zks])
    data, st = zks[0].get("/kz/counter")
    print(f"lock count={data.decode()} version={st.version} mostAtOnce={most[0]} "
          f"lockNodesLeft={len(zks[0].get_children('/kz/lock'))}", flush=True)


def read_write_lock():
    """Two readers hold a ReadLock together while a writer's WriteLock waits for both."""
    r1, r2, w = client(), client(), client()
    a, b = r1.ReadLock("/kz/rwlock", "r1"), r2.ReadLock("/kz/rwlock", "r2")
    a.acquire(timeout=WAIT)
    both = b.acquire(timeout=WAIT)
    wl = w.WriteLock("/kz/rwlock", "w")
    early = wl.acquire(blocking=False)
    a.release()
    b.release()
    late = wl.acquire(timeout=WAIT)
    wl.release()
    print(f"rwlock readersTogether={both} writerWhileRead={early} writerAfter={late}", flush=True)


def election():
    """Three sessions run an Election in turn: each runs its leader function once, one at a time."""
    zks = [client() for _ in range(3)]
    led, running, most, mu = [], [0], [0], threading.Lock()

    def lead(name):
        with mu:
            running[0] += 1
            most[0] = max(most[0], running[0])
            led.append(name)
        threading.Event().wait(0.05)
        with mu:
            running[0] -= 1

    run_all([lambda zk=zk, i=i: zk.Election("/kz/election", f"p{i}").run(lead, f"p{i}")
             for i, zk in enumerate(zks)])
    print(f"election led={sorted(led)} mostAtOnce={most[0]} "
          f"contendersLeft={len(zks[0].get_children('/kz/election'))}", flush=True)


def locking_queue():
    """A producer puts 60 items in a LockingQueue while three consumers take them: every item is
    taken once, and each consumer takes its items in the order they were put."""
    zks = [client() for _ in range(4)]
    left, mu = [60], threading.Lock()

    def consume(zk):
        q, got = zk.LockingQueue("/kz/queue"), []
        while True:
            with mu:
                if left[0] == 0:
                    return got
                left[0] -= 1
            item = q.get(timeout=WAIT)
            if item is None:
                raise TimeoutError("queue: nothing to take")
            got.append(int(item))
            q.consume()

    def produce():
        q = zks[0].LockingQueue("/kz/queue")
        for i in range(60):
            q.put(str(i).encode())
        return []

    results = run_all([produce] + [lambda zk=zk: consume(zk) for zk in zks[1:]])
    taken = [i for got in results for i in got]
    in_order = all(got == sorted(got) for got in results)
    print(f"lockingQueue taken={len(taken)} distinct={len(set(taken))} eachInOrder={in_order} "
          f"left={len(zks[0].LockingQueue('/kz/queue'))}", flush=True)


def counter():
    """Four sessions add 1 to a Counter 25 times each."""
    zks = [client() for _ in range(4)]

    def work(zk):
        c = zk.Counter("/kz/counter2")
        for _ in range(25):
            c += 1

    run_all([lambda zk=zk: work(zk) for zk in zks])
    print(f"counter value={zks[0].Counter('/kz/counter2').value}", flush=True)


def double_barrier():
    """Three members enter a DoubleBarrier together and leave it together."""
    zks = [client() for _ in range(3)]
    called, early, mu = [0], [0], threading.Lock()

    def member(zk, i):
        b = zk.DoubleBarrier("/kz/barrier", 3, identifier=f"m{i}")
        with mu:
            called[0] += 1
        b.enter()
        with mu:
            if called[0] < 3:
                early[0] += 1
        b.leave()

    run_all([lambda zk=zk, i=i: member(zk, i) for i, zk in enumerate(zks)])
    print(f"doubleBarrier passed={called[0]} passedEarly={early[0]} "
          f"left={len(zks[0].get_children('/kz/barrier'))}", flush=True)


def semaphore():
    """Five sessions take one of two leases of a Semaphore five times each."""
    zks = [client() for _ in range(5)]
    holders, most, taken, mu = [0], [0], [0], threading.Lock()

    def work(zk, i):
        s = zk.Semaphore("/kz/semaphore", identifier=f"s{i}", max_leases=2)
        for _ in range(5):
            if not s.acquire(timeout=WAIT):
                raise TimeoutError("semaphore: no lease")
            with mu:
                holders[0] += 1
                taken[0] += 1
                most[0] = max(most[0], holders[0])
            threading.Event().wait(0.002)
            with mu:
                holders[0] -= 1
            s.release()

    run_all([lambda zk=zk, i=i: work(zk, i) for i, zk in enumerate(zks)])
    print(f"semaphore acquired={taken[0]} atMostTwo={most[0] <= 2}", flush=True)


def watches():
    """DataWatch and ChildrenWatch follow another session's changes, one at a time; a Party
    shows its members; and an ephemeral goes with its session."""
    zk, writer = client(), client()
    writer.create("/kz/watched", b"0")
    events = queue.Queue()

    @zk.DataWatch("/kz/watched")
    def data(value, stat, event):
        events.put(f"data {value.decode() if value is not None else None} "
                   f"{event.type if event else 'initial'}")

    @zk.ChildrenWatch("/kz/watched")
    def children(names):
        events.put(f"children {sorted(names)}")

    take("watches", events, 2)
    writer.set("/kz/watched", b"1")
    take("watches", events, 1)
    owner = KazooClient(hosts=addr, timeout=10)
    owner.start(timeout=WAIT)
    owner.create("/kz/watched/e", b"", ephemeral=True)
    take("watches", events, 1)
    owner.stop()
    owner.close()
    take("watches", events, 1)
    party = [z.Party("/kz/party", f"m{i}") for i, z in enumerate([zk, writer])]
    for p in party:
        p.join()
    print(f"watches party={sorted(party[0])}", flush=True)
    writer.delete("/kz/watched")
    take("watches", events, 1)


def tree_cache():
    """A TreeCache sees a subtree built, changed and removed by another session."""
    zk, writer = client(), client()
    writer.create("/kz/tree/a", b"1", makepath=True)
    events = queue.Queue()
    cache = TreeCache(zk, "/kz/tree")

    def listener(event):
        if event.event_type == event.INITIALIZED:
            events.put("INITIALIZED")
        elif event.event_type in (event.NODE_ADDED, event.NODE_UPDATED, event.NODE_REMOVED):
            name = {event.NODE_ADDED: "NODE_ADDED", event.NODE_UPDATED: "NODE_UPDATED",
                    event.NODE_REMOVED: "NODE_REMOVED"}[event.event_type]
            events.put(f"{name} {event.event_data.path}={event.event_data.data.decode()}")

    cache.listen(listener)
    cache.start()
    # The initial adds come in the order the cache reads them; sort them.
    initial = sorted(events.get(timeout=WAIT) for _ in range(3))
    for e in initial:
        print("treeCache", e, flush=True)
    writer.set("/kz/tree/a", b"2")
    take("treeCache", events, 1)
    writer.create("/kz/tree/a/b", b"3")
    take("treeCache", events, 1)
    writer.delete("/kz/tree/a/b")
    take("treeCache", events, 1)
    cache.close()


def transaction():
    """A transaction whose check fails changes nothing; one that holds commits every op."""
    zk = client()
    zk.create("/kz/txn", b"v0")
    t = zk.transaction()
    t.create("/kz/txn/a", b"a")
    t.set_data("/kz/txn", b"v1")
    t.check("/kz/txn", 7)
    results = t.commit()
    print("transaction failing:", " ".join(type(r).__name__ for r in results),
          f"a={zk.exists('/kz/txn/a') is not None} data={zk.get('/kz/txn')[0].decode()}", flush=True)
    t = zk.transaction()
    t.create("/kz/txn/s-", b"s", sequence=True)
    t.set_data("/kz/txn", b"v2")
    t.check("/kz/txn", 1)
    results = t.commit()
    print("transaction holding:", " ".join(r if isinstance(r, str) else type(r).__name__ for r in results),
          flush=True)
    try:
        zk.set("/kz/txn", b"v3", version=1)
        print("transaction setAfter ok", flush=True)
    except BadVersionError:
        print("transaction setAfter BadVersionError", flush=True)


def main():
    try:
        for step in (lock, read_write_lock, election, locking_queue, counter, double_barrier,
                     semaphore, watches, tree_cache, transaction):
            step()
    except Exception as e:
        print("FAIL", step.__name__, type(e).__name__, e, flush=True)
        sys.exit(1)
    finally:
        for zk in clients:
            zk.stop()
            zk.close()


if __name__ == "__main__":
    main()
