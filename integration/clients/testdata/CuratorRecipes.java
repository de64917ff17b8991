// Apache Curator's recipes against a server (args: connect string, mode), for
// integration/curator_test.go. Each step prints what a user of the recipe relies on, in lines
// that do not depend on timing, so that zetcd's and ZooKeeper's outputs can be compared line for
// line. A step that does not finish in time prints a FAIL line and the program exits 1.
//
// Modes: "recipes" runs every recipe against one server; "move" holds a lock, a leader latch and
// a cache on one session, prints "ready" and the session's id, waits for a line on stdin (the test stops the server
// the session is on meanwhile) and checks that all three carry on where the session resumed.
// "contend" has four sessions take turns on an InterProcessMutex, prints "ready" and the first
// session's id once 30 turns are done, and goes on to 600 turns while the test kills a server; it
// says how many turns were done when it was told to go on (after the kill).
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.api.transaction.CuratorOp;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.cache.TreeCache;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.queue.SimpleDistributedQueue;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.AddWatchMode;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.data.Stat;

public class CuratorRecipes {
    static final long WAIT_SECONDS = 30;
    static String addr;
    static final List<CuratorFramework> clients = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        addr = args[0];
        try {
            if (args[1].equals("move")) {
                move();
            } else if (args[1].equals("contend")) {
                contend();
            } else {
                mutex();
                leaderLatch();
                queue();
                curatorCache();
                persistentRecursiveWatch();
                treeCacheEphemeral();
                counters();
                barrier();
                semaphore();
                transaction();
            }
        } catch (Throwable e) {
            System.out.println("FAIL " + e);
            e.printStackTrace();
            System.exit(1);
        } finally {
            for (CuratorFramework c : clients) {
                c.close();
            }
        }
        System.exit(0);
    }

    // move: see the top of the file.
    static void move() throws Exception {
        CuratorFramework c = client(), writer = client();
        long session = c.getZookeeperClient().getZooKeeper().getSessionId();
        List<String> states = Collections.synchronizedList(new ArrayList<>());
        c.getConnectionStateListenable().addListener((cl, st) -> states.add(st.toString()));
        InterProcessMutex m = new InterProcessMutex(c, "/move/lock");
        if (!m.acquire(WAIT_SECONDS, TimeUnit.SECONDS)) {
            throw new IllegalStateException("mutex not acquired");
        }
        LeaderLatch latch = new LeaderLatch(c, "/move/leader", "only");
        latch.start();
        if (!latch.await(WAIT_SECONDS, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no leadership");
        }
        writer.create().creatingParentsIfNeeded().forPath("/move/cache", bytes("0"));
        BlockingQueue<String> events = new LinkedBlockingQueue<>();
        CuratorCache cache = CuratorCache.build(c, "/move/cache");
        cache.listenable().addListener((type, before, after) -> events.add(type + " "
                + (after != null ? after.getPath() + "=" + string(after.getData()) : before.getPath())));
        cache.start();
        print("move", events, 1);
        // A one-time exists watch on a node not there yet: the client sets it again on the
        // server it resumes on (setWatches), as CuratorCache's persistent recursive watch.
        BlockingQueue<String> watched = new LinkedBlockingQueue<>();
        c.checkExists().usingWatcher((Watcher) e -> {
            if (e.getType() != Watcher.Event.EventType.None) { // not the connection's states
                watched.add(e.getType() + " " + e.getPath());
            }
        }).forPath("/move/w");
        System.out.println("ready 0x" + Long.toHexString(session));
        System.out.flush();
        new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine();
        // The writer may have been on the stopped server too: its change waits for its session.
        writer.setData().forPath("/move/cache", bytes("1"));
        writer.create().forPath("/move/cache/after", bytes("2"));
        print("move", events, 2);
        writer.create().forPath("/move/w");
        print("move", watched, 1);
        if (!latch.await(WAIT_SECONDS, TimeUnit.SECONDS)) {
            throw new IllegalStateException("leadership not regained");
        }
        System.out.println("move sameSession=" + (c.getZookeeperClient().getZooKeeper().getSessionId() == session)
                + " states=" + states + " lockHeld=" + m.isAcquiredInThisProcess()
                + " lockNodes=" + writer.getChildren().forPath("/move/lock").size() + " leader=" + latch.hasLeadership());
        m.release();
        System.out.println("move lockNodesAfterRelease=" + writer.getChildren().forPath("/move/lock").size());
    }

    // contend: see the top of the file. No two sessions may hold the mutex at once, before, during
    // or after the kill, and every session must survive it.
    static final int CONTEND_TURNS = 600;

    static void contend() throws Exception {
        List<CuratorFramework> cs = clients(4);
        List<Long> sessions = new ArrayList<>();
        for (CuratorFramework c : cs) {
            sessions.add(c.getZookeeperClient().getZooKeeper().getSessionId());
        }
        AtomicInteger holders = new AtomicInteger(), maxHolders = new AtomicInteger(), turns = new AtomicInteger();
        java.util.concurrent.CountDownLatch some = new java.util.concurrent.CountDownLatch(30);
        List<Callable<Integer>> tasks = new ArrayList<>();
        for (CuratorFramework c : cs) {
            tasks.add(() -> {
                InterProcessMutex m = new InterProcessMutex(c, "/contend/lock");
                while (turns.get() < CONTEND_TURNS) {
                    if (!m.acquire(WAIT_SECONDS, TimeUnit.SECONDS)) {
                        throw new IllegalStateException("mutex not acquired");
                    }
                    try {
                        maxHolders.accumulateAndGet(holders.incrementAndGet(), Math::max);
                        // Hold it across a round trip, so that a kill finds it held.
                        c.checkExists().forPath("/contend");
                        turns.incrementAndGet();
                        some.countDown();
                        holders.decrementAndGet();
                    } finally {
                        m.release();
                    }
                }
                return 0;
            });
        }
        ExecutorService pool = Executors.newFixedThreadPool(tasks.size());
        try {
            List<Future<Integer>> fs = new ArrayList<>();
            for (Callable<Integer> t : tasks) {
                fs.add(pool.submit(t));
            }
            if (!some.await(WAIT_SECONDS, TimeUnit.SECONDS)) {
                throw new IllegalStateException("contend: 30 turns not done");
            }
            System.out.println("ready 0x" + Long.toHexString(sessions.get(0)));
            System.out.flush();
            new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine();
            System.out.println("resumed at turn " + turns.get());
            for (Future<Integer> f : fs) {
                f.get(2 * WAIT_SECONDS, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        boolean kept = true;
        for (int i = 0; i < cs.size(); i++) {
            kept &= cs.get(i).getZookeeperClient().getZooKeeper().getSessionId() == sessions.get(i);
        }
        System.out.println("contend turns>=" + CONTEND_TURNS + " " + (turns.get() >= CONTEND_TURNS) + " maxHolders=" + maxHolders.get()
                + " sessionsKept=" + kept + " lockNodesLeft=" + cs.get(0).getChildren().forPath("/contend/lock").size());
    }

    // client opens a session of its own and waits for it.
    static CuratorFramework client() throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.newClient(addr, 10000, 5000, new RetryNTimes(3, 200));
        c.start();
        if (!c.blockUntilConnected((int) WAIT_SECONDS, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no session with " + addr);
        }
        synchronized (clients) {
            clients.add(c);
        }
        return c;
    }

    static List<CuratorFramework> clients(int n) throws Exception {
        List<CuratorFramework> cs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            cs.add(client());
        }
        return cs;
    }

    // runAll runs the tasks on threads of their own and waits for every one.
    static <T> List<T> runAll(List<Callable<T>> tasks) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(tasks.size());
        try {
            List<Future<T>> fs = new ArrayList<>();
            for (Callable<T> t : tasks) {
                fs.add(pool.submit(t));
            }
            List<T> out = new ArrayList<>();
            for (Future<T> f : fs) {
                out.add(f.get(2 * WAIT_SECONDS, TimeUnit.SECONDS));
            }
            return out;
        } finally {
            pool.shutdownNow();
        }
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String string(byte[] b) {
        return b == null ? "null" : new String(b, StandardCharsets.UTF_8);
    }

    // mutex: four sessions take an InterProcessMutex 20 times each and, holding it, increment a
    // counter node read-modify-write guarded by its version: a second holder would fail the guard.
    static void mutex() throws Exception {
        List<CuratorFramework> cs = clients(4);
        cs.get(0).create().creatingParentsIfNeeded().forPath("/recipes/counter", bytes("0"));
        AtomicInteger holders = new AtomicInteger(), maxHolders = new AtomicInteger();
        List<Callable<Integer>> tasks = new ArrayList<>();
        for (CuratorFramework c : cs) {
            tasks.add(() -> {
                InterProcessMutex m = new InterProcessMutex(c, "/recipes/locks/mutex");
                for (int i = 0; i < 20; i++) {
                    if (!m.acquire(WAIT_SECONDS, TimeUnit.SECONDS)) {
                        throw new IllegalStateException("mutex not acquired");
                    }
                    try {
                        maxHolders.accumulateAndGet(holders.incrementAndGet(), Math::max);
                        Stat st = new Stat();
                        int n = Integer.parseInt(string(c.getData().storingStatIn(st).forPath("/recipes/counter")));
                        c.setData().withVersion(st.getVersion()).forPath("/recipes/counter", bytes(Integer.toString(n + 1)));
                        holders.decrementAndGet();
                    } finally {
                        m.release();
                    }
                }
                return 0;
            });
        }
        runAll(tasks);
        Stat st = new Stat();
        String count = string(cs.get(0).getData().storingStatIn(st).forPath("/recipes/counter"));
        System.out.println("mutex count=" + count + " version=" + st.getVersion() + " maxHolders=" + maxHolders.get()
                + " lockNodesLeft=" + cs.get(0).getChildren().forPath("/recipes/locks/mutex").size());
    }

    // leaderLatch: three latches; exactly one leads at a time, and closing the leader hands the
    // lead to another until each has led once.
    static void leaderLatch() throws Exception {
        List<LeaderLatch> latches = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            LeaderLatch l = new LeaderLatch(client(), "/recipes/leader", "p" + i);
            l.start();
            latches.add(l);
        }
        Set<String> led = new TreeSet<>();
        int most = 0;
        List<LeaderLatch> open = new ArrayList<>(latches);
        while (!open.isEmpty()) {
            LeaderLatch leader = null;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
            while (leader == null) {
                int leading = 0;
                for (LeaderLatch l : open) {
                    if (l.hasLeadership()) {
                        leading++;
                        leader = l;
                    }
                }
                most = Math.max(most, leading);
                if (leader == null) {
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException("no leader among " + open.size());
                    }
                    Thread.sleep(5);
                }
            }
            String id = leader.getId();
            if (!leader.getLeader().getId().equals(id)) {
                throw new IllegalStateException("leader " + id + " sees " + leader.getLeader().getId());
            }
            led.add(id);
            open.remove(leader);
            leader.close();
        }
        System.out.println("leaderLatch led=" + led + " mostAtOnce=" + most);
    }

    // queue: a producer offers 60 items to a SimpleDistributedQueue while three consumers take;
    // every item is taken once, and each consumer takes its items in the order they were offered.
    static void queue() throws Exception {
        List<CuratorFramework> cs = clients(4);
        List<Callable<List<Integer>>> tasks = new ArrayList<>();
        AtomicInteger left = new AtomicInteger(60);
        for (int i = 1; i < 4; i++) {
            SimpleDistributedQueue q = new SimpleDistributedQueue(cs.get(i), "/recipes/queue");
            tasks.add(() -> {
                List<Integer> got = new ArrayList<>();
                while (left.getAndDecrement() > 0) {
                    byte[] b = q.poll(WAIT_SECONDS, TimeUnit.SECONDS);
                    if (b == null) {
                        throw new IllegalStateException("queue: nothing to take");
                    }
                    got.add(Integer.parseInt(string(b)));
                }
                return got;
            });
        }
        SimpleDistributedQueue producer = new SimpleDistributedQueue(cs.get(0), "/recipes/queue");
        tasks.add(() -> {
            for (int i = 0; i < 60; i++) {
                producer.offer(bytes(Integer.toString(i)));
            }
            return new ArrayList<>();
        });
        Set<Integer> all = new TreeSet<>();
        int taken = 0;
        boolean ordered = true;
        for (List<Integer> got : runAll(tasks)) {
            taken += got.size();
            all.addAll(got);
            List<Integer> sorted = new ArrayList<>(got);
            Collections.sort(sorted);
            ordered &= sorted.equals(got);
        }
        System.out.println("queue taken=" + taken + " distinct=" + all.size() + " eachInOrder=" + ordered
                + " left=" + cs.get(0).getChildren().forPath("/recipes/queue").size());
    }

    // curatorCache: a CuratorCache follows changes made by another session, one at a time.
    static void curatorCache() throws Exception {
        CuratorFramework watcher = client(), writer = client();
        writer.create().forPath("/recipes/cache", bytes("root"));
        BlockingQueue<String> events = new LinkedBlockingQueue<>();
        CuratorCache cache = CuratorCache.build(watcher, "/recipes/cache");
        cache.listenable().addListener(new CuratorCacheListener() {
            public void event(Type type, ChildData before, ChildData after) {
                events.add(type + " " + (after != null ? after.getPath() + "=" + string(after.getData()) : before.getPath()));
            }

            public void initialized() {
                events.add("initialized");
            }
        });
        cache.start();
        print("curatorCache", events, 2);
        writer.create().forPath("/recipes/cache/a", bytes("1"));
        print("curatorCache", events, 1);
        writer.setData().forPath("/recipes/cache/a", bytes("2"));
        print("curatorCache", events, 1);
        writer.create().forPath("/recipes/cache/a/b", bytes("3"));
        print("curatorCache", events, 1);
        writer.delete().forPath("/recipes/cache/a/b");
        print("curatorCache", events, 1);
        writer.delete().forPath("/recipes/cache/a");
        print("curatorCache", events, 1);
        System.out.println("curatorCache size=" + cache.size());
        cache.close();
    }

    // print takes n events and prints each, prefixed with step.
    static void print(String step, BlockingQueue<String> events, int n) throws Exception {
        for (int i = 0; i < n; i++) {
            String e = events.poll(WAIT_SECONDS, TimeUnit.SECONDS);
            if (e == null) {
                throw new IllegalStateException(step + ": no event");
            }
            System.out.println(step + " " + e);
        }
    }

    // persistentRecursiveWatch: one session's five changes under a watched subtree, made without
    // waiting, arrive at the watcher in the order they were made.
    static void persistentRecursiveWatch() throws Exception {
        CuratorFramework watcher = client(), writer = client();
        writer.create().forPath("/recipes/pw");
        BlockingQueue<String> events = new LinkedBlockingQueue<>();
        watcher.watchers().add().withMode(AddWatchMode.PERSISTENT_RECURSIVE)
                .usingWatcher((Watcher) e -> {
                    if (e.getType() != Watcher.Event.EventType.None) {
                        events.add(e.getType() + " " + e.getPath());
                    }
                }).forPath("/recipes/pw");
        writer.create().forPath("/recipes/pw/x", bytes("1"));
        writer.setData().forPath("/recipes/pw/x", bytes("2"));
        writer.create().forPath("/recipes/pw/x/y");
        writer.delete().forPath("/recipes/pw/x/y");
        writer.delete().forPath("/recipes/pw/x");
        print("persistentRecursiveWatch", events, 5);
    }

    // treeCacheEphemeral: a TreeCache sees another session's ephemeral appear, and go when that
    // session closes.
    static void treeCacheEphemeral() throws Exception {
        CuratorFramework watcher = client();
        CuratorFramework owner = CuratorFrameworkFactory.newClient(addr, 10000, 5000, new RetryNTimes(3, 200));
        owner.start();
        owner.blockUntilConnected((int) WAIT_SECONDS, TimeUnit.SECONDS);
        watcher.create().forPath("/recipes/members");
        BlockingQueue<String> events = new LinkedBlockingQueue<>();
        TreeCache cache = TreeCache.newBuilder(watcher, "/recipes/members").build();
        cache.getListenable().addListener((c, e) -> {
            switch (e.getType()) {
                case NODE_ADDED, NODE_UPDATED, NODE_REMOVED -> events.add(e.getType() + " " + e.getData().getPath());
                case INITIALIZED -> events.add("INITIALIZED");
                default -> {
                }
            }
        });
        cache.start();
        print("treeCacheEphemeral", events, 2);
        owner.create().withMode(CreateMode.EPHEMERAL).forPath("/recipes/members/m1", bytes("up"));
        print("treeCacheEphemeral", events, 1);
        owner.close();
        print("treeCacheEphemeral", events, 1);
        cache.close();
    }

    // counters: four sessions increment a SharedCount and a DistributedAtomicLong 25 times each.
    static void counters() throws Exception {
        List<CuratorFramework> cs = clients(4);
        List<Callable<Integer>> tasks = new ArrayList<>();
        for (CuratorFramework c : cs) {
            tasks.add(() -> {
                SharedCount sc = new SharedCount(c, "/recipes/sharedcount", 0);
                sc.start();
                DistributedAtomicLong al = new DistributedAtomicLong(c, "/recipes/atomiclong", new RetryNTimes(1000, 1));
                try {
                    for (int i = 0; i < 25; i++) {
                        while (true) {
                            VersionedValue<Integer> v = sc.getVersionedValue();
                            if (sc.trySetCount(v, v.getValue() + 1)) {
                                break;
                            }
                        }
                        AtomicValue<Long> r = al.increment();
                        if (!r.succeeded()) {
                            throw new IllegalStateException("atomic increment failed");
                        }
                    }
                } finally {
                    sc.close();
                }
                return 0;
            });
        }
        runAll(tasks);
        SharedCount sc = new SharedCount(cs.get(0), "/recipes/sharedcount", 0);
        sc.start();
        System.out.println("counters sharedCount=" + sc.getCount() + " atomicLong="
                + new DistributedAtomicLong(cs.get(0), "/recipes/atomiclong", new RetryNTimes(3, 10)).get().postValue());
        sc.close();
    }

    // barrier: three members enter a DistributedDoubleBarrier together and leave it together.
    static void barrier() throws Exception {
        List<CuratorFramework> cs = clients(3);
        AtomicInteger entered = new AtomicInteger(), enteredBeforeAll = new AtomicInteger();
        List<Callable<Integer>> tasks = new ArrayList<>();
        for (CuratorFramework c : cs) {
            tasks.add(() -> {
                DistributedDoubleBarrier b = new DistributedDoubleBarrier(c, "/recipes/barrier", 3);
                entered.incrementAndGet();
                if (!b.enter(WAIT_SECONDS, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("barrier: enter timed out");
                }
                if (entered.get() < 3) {
                    enteredBeforeAll.incrementAndGet();
                }
                if (!b.leave(WAIT_SECONDS, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("barrier: leave timed out");
                }
                return 0;
            });
        }
        runAll(tasks);
        System.out.println("barrier passed=" + entered.get() + " passedEarly=" + enteredBeforeAll.get()
                + " left=" + cs.get(0).getChildren().forPath("/recipes/barrier").size());
    }

    // semaphore: five sessions take one of two leases of an InterProcessSemaphoreV2 five times
    // each; no more than two hold one at once.
    static void semaphore() throws Exception {
        List<CuratorFramework> cs = clients(5);
        AtomicInteger holders = new AtomicInteger(), maxHolders = new AtomicInteger(), acquired = new AtomicInteger();
        List<Callable<Integer>> tasks = new ArrayList<>();
        for (CuratorFramework c : cs) {
            tasks.add(() -> {
                InterProcessSemaphoreV2 s = new InterProcessSemaphoreV2(c, "/recipes/semaphore", 2);
                for (int i = 0; i < 5; i++) {
                    Lease l = s.acquire(WAIT_SECONDS, TimeUnit.SECONDS);
                    if (l == null) {
                        throw new IllegalStateException("semaphore: no lease");
                    }
                    maxHolders.accumulateAndGet(holders.incrementAndGet(), Math::max);
                    acquired.incrementAndGet();
                    Thread.sleep(2);
                    holders.decrementAndGet();
                    s.returnLease(l);
                }
                return 0;
            });
        }
        runAll(tasks);
        System.out.println("semaphore acquired=" + acquired.get() + " atMostTwo=" + (maxHolders.get() <= 2));
    }

    // transaction: a Curator transaction whose last check fails changes nothing; one that holds
    // commits every op.
    static void transaction() throws Exception {
        CuratorFramework c = client();
        c.create().forPath("/recipes/txn", bytes("v0"));
        List<CuratorOp> failing = List.of(
                c.transactionOp().create().forPath("/recipes/txn/a", bytes("a")),
                c.transactionOp().setData().forPath("/recipes/txn", bytes("v1")),
                c.transactionOp().check().withVersion(7).forPath("/recipes/txn"));
        try {
            c.transaction().forOperations(failing);
            System.out.println("transaction failing: committed");
        } catch (KeeperException e) {
            System.out.println("transaction failing: " + e.code() + " a=" + (c.checkExists().forPath("/recipes/txn/a") != null)
                    + " data=" + string(c.getData().forPath("/recipes/txn")));
        }
        List<CuratorOp> holding = List.of(
                c.transactionOp().create().withMode(CreateMode.PERSISTENT_SEQUENTIAL).forPath("/recipes/txn/s-", bytes("s")),
                c.transactionOp().setData().forPath("/recipes/txn", bytes("v2")),
                c.transactionOp().check().withVersion(1).forPath("/recipes/txn"));
        List<String> results = new ArrayList<>();
        for (var r : c.transaction().forOperations(holding)) {
            results.add(r.getType() + ":" + r.getForPath() + ":" + r.getResultPath() + ":" + r.getError());
        }
        System.out.println("transaction holding: " + String.join(" ", results));
    }
}
