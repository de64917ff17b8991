// Apache Curator's recipes across a migration's cutover (args: connect string of a zetcd in
// migration mode), for integration/clients/migrate_curator_test.go. Four Curator sessions:
// "holder" holds an InterProcessMutex and leads a LeaderLatch; "contender" tries for the same
// mutex all along and joins the latch; "cache" runs a CuratorCache, and a TreeCache of nodes
// nothing changes; "writer" changes the CuratorCache's tree. Once the changes before the cutover are seen and the writer creates nodes one after
// another, it prints "ready" and the holder's session id, and waits for a line on stdin,
// "go <start> <end>": the cutover ran from start to end (milliseconds since the epoch) and
// ZooKeeper is stopped since. It then makes the changes after, and prints what the recipes' users
// rely on in lines that do not depend on timing; "info" lines say how many writes there were.
//
// The sessions use Curator's SessionConnectionStateErrorPolicy: a mutex holder and a latch
// leader keep what they hold through SUSPENDED, as long as the session lives, which is what a
// cutover keeps (with the default StandardConnectionStateErrorPolicy a LeaderLatch gives up its
// leadership at any disconnection, on ZooKeeper as on zetcd).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.cache.TreeCache;
import org.apache.curator.framework.recipes.cache.TreeCacheEvent;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.SessionConnectionStateErrorPolicy;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

public class MigrateCurator {
    static final long WAIT_MILLIS = 60_000;
    // PAUSE_MILLIS between the writer's creates during the cutover keeps ZooKeeper's rate of
    // transactions within what the copy follows on a small shared machine.
    static final long PAUSE_MILLIS = 5;
    static String addr;
    static final Map<String, CuratorFramework> clients = new LinkedHashMap<>();
    static final Map<String, List<String>> states = new LinkedHashMap<>();
    static final List<String> events = Collections.synchronizedList(new ArrayList<>());
    static final List<String> made = Collections.synchronizedList(new ArrayList<>());

    public static void main(String[] args) throws Exception {
        addr = args[0];
        try {
            run();
        } catch (Throwable e) {
            System.out.println("FAIL " + e);
            e.printStackTrace();
            System.exit(1);
        } finally {
            for (CuratorFramework c : clients.values()) {
                c.close();
            }
        }
        System.exit(0);
    }

    static void run() throws Exception {
        CuratorFramework holder = client("holder"), contender = client("contender"), cacheClient = client("cache"),
                writer = client("writer");
        Map<String, Long> sessions = new LinkedHashMap<>();
        for (Map.Entry<String, CuratorFramework> e : clients.entrySet()) {
            sessions.put(e.getKey(), e.getValue().getZookeeperClient().getZooKeeper().getSessionId());
        }

        writer.create().forPath("/mig");
        writer.create().forPath("/mig/cache", bytes("root"));
        made.add("NODE_CREATED /mig/cache=root");
        CuratorCache cache = CuratorCache.build(cacheClient, "/mig/cache");
        cache.listenable().addListener(CuratorCacheListener.builder()
                .forAll((type, before, after) -> events.add(type + " "
                        + (after != null ? after.getPath() + "=" + string(after.getData()) : before.getPath())))
                .forInitialized(() -> events.add("initialized"))
                .build());
        cache.start();
        made.add("initialized");
        awaitEvents();

        // A TreeCache of nodes nothing changes: it tells changes by mzxid, which zetcd shows as
        // ZooKeeper did (docs/migration.md, "Cutover"), so it publishes nothing at the cutover.
        writer.create().forPath("/mig/tree", bytes("t"));
        writer.create().forPath("/mig/tree/x", bytes("1"));
        List<String> treeEvents = Collections.synchronizedList(new ArrayList<>());
        TreeCache tree = TreeCache.newBuilder(cacheClient, "/mig/tree").build();
        tree.getListenable().addListener((cl, e) -> {
            if (e.getData() != null) {
                treeEvents.add(e.getType() + " " + e.getData().getPath() + "=" + string(e.getData().getData()));
            } else if (e.getType() == TreeCacheEvent.Type.INITIALIZED) {
                treeEvents.add(e.getType().toString());
            }
        });
        tree.start();
        long deadline = System.currentTimeMillis() + WAIT_MILLIS;
        while (!treeEvents.contains("INITIALIZED") && System.currentTimeMillis() < deadline) {
            sleep(5);
        }

        InterProcessMutex mutex = new InterProcessMutex(holder, "/mig/lock");
        if (!mutex.acquire(WAIT_MILLIS, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("mutex not acquired");
        }
        String lockNode = holder.getChildren().forPath("/mig/lock").get(0);
        LeaderLatch leader = new LeaderLatch(holder, "/mig/leader", "a");
        AtomicInteger notLeader = new AtomicInteger();
        leader.addListener(new LeaderLatchListener() {
            public void isLeader() { }
            public void notLeader() { notLeader.incrementAndGet(); }
        });
        leader.start();
        if (!leader.await(WAIT_MILLIS, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("no leadership");
        }
        // The contender asks for the mutex again and again; the latches' listeners and a
        // watchdog tell whether the leadership ever moved.
        AtomicBoolean stop = new AtomicBoolean(), contenderGot = new AtomicBoolean(), leaderLost = new AtomicBoolean(),
                otherLed = new AtomicBoolean(), released = new AtomicBoolean();
        LeaderLatch other = new LeaderLatch(contender, "/mig/leader", "b");
        other.addListener(new LeaderLatchListener() {
            public void isLeader() {
                if (!released.get()) {
                    otherLed.set(true);
                }
            }
            public void notLeader() { }
        });
        other.start();

        AtomicInteger attempts = new AtomicInteger();
        InterProcessMutex contended = new InterProcessMutex(contender, "/mig/lock");
        Thread contending = thread(() -> {
            while (!stop.get()) {
                try {
                    if (contended.acquire(1500, TimeUnit.MILLISECONDS)) {
                        contenderGot.set(true);
                        contended.release();
                    }
                } catch (Exception e) {
                    // a connection lost during the cutover: ask again
                }
                attempts.incrementAndGet();
            }
        });
        Thread watchdog = thread(() -> {
            while (!stop.get()) {
                if (!leader.hasLeadership()) {
                    leaderLost.set(true);
                }
                if (other.hasLeadership()) {
                    otherLed.set(true);
                }
                sleep(2);
            }
        });

        // Changes before the cutover, each seen before the next is made.
        change(() -> writer.create().forPath("/mig/cache/b", bytes("0")), "NODE_CREATED /mig/cache/b=0");
        change(() -> writer.setData().forPath("/mig/cache/b", bytes("1")), "NODE_CHANGED /mig/cache/b=1");
        change(() -> writer.create().forPath("/mig/cache/gone", bytes("x")), "NODE_CREATED /mig/cache/gone=x");
        change(() -> writer.delete().forPath("/mig/cache/gone"), "NODE_DELETED /mig/cache/gone");

        // Changes during the cutover: creates one after another, each of a node of its own, so
        // that a create made again after a lost connection shows as NodeExists, not as a second change.
        List<long[]> writes = Collections.synchronizedList(new ArrayList<>()); // issued, acknowledged
        AtomicBoolean stopWriting = new AtomicBoolean();
        Thread writing = thread(() -> {
            for (int i = 0; !stopWriting.get(); i++) {
                String p = String.format("/mig/cache/d-%05d", i);
                long issued = System.currentTimeMillis();
                while (true) {
                    try {
                        writer.create().forPath(p, bytes(Integer.toString(i)));
                        break;
                    } catch (KeeperException.NodeExistsException e) {
                        break; // made by an attempt whose answer was lost
                    } catch (Exception e) {
                        sleep(10);
                    }
                }
                made.add("NODE_CREATED " + p + "=" + i);
                writes.add(new long[] {issued, System.currentTimeMillis()});
                sleep(PAUSE_MILLIS);
            }
        });
        while (writes.size() < 20 || attempts.get() < 2) {
            sleep(10);
        }

        int treeBefore = treeEvents.size();
        System.out.println("ready 0x" + Long.toHexString(sessions.get("holder")));
        System.out.flush();
        String[] go = new BufferedReader(new InputStreamReader(System.in)).readLine().split(" ");
        long start = Long.parseLong(go[1]), end = Long.parseLong(go[2]);
        int n = writes.size();
        while (writes.size() < n + 20) {
            sleep(10);
        }
        stopWriting.set(true);
        writing.join();
        awaitEvents();

        // Changes after the cutover, ZooKeeper stopped.
        change(() -> writer.setData().forPath("/mig/cache/b", bytes("2")), "NODE_CHANGED /mig/cache/b=2");
        change(() -> writer.delete().forPath("/mig/cache/b"), "NODE_DELETED /mig/cache/b");
        change(() -> writer.create().forPath("/mig/cache/after", bytes("z")), "NODE_CREATED /mig/cache/after=z");
        awaitEvents();

        int before = 0, during = 0, after = 0;
        synchronized (writes) {
            for (long[] w : writes) {
                if (w[1] < start) {
                    before++;
                } else if (w[0] > end) {
                    after++;
                } else {
                    during++;
                }
            }
        }
        System.out.println("info writes acknowledged before the cutover " + before + ", overlapping it " + during
                + ", made after it " + after + "; contender's attempts " + attempts.get());
        // Every change once, and each node's changes in the order they were made. Across nodes
        // the order may differ around the cutover: a read the cache had in flight when the
        // relayed connection closed is retried after the retry policy's sleep, and a read of a
        // node created after the reconnection may be answered first.
        boolean oncePerNodeInOrder = byNode(events).equals(byNode(made));
        System.out.println("curatorCache everyChangeOncePerNodeInOrder=" + oncePerNodeInOrder);
        if (!oncePerNodeInOrder) {
            System.err.println("curatorCache saw " + events + "\nthe writer made " + made);
        }
        System.out.println("writer before=" + (before > 0) + " during=" + (during > 0) + " after=" + (after > 0));

        List<String> treeAfter;
        synchronized (treeEvents) {
            treeAfter = new ArrayList<>(treeEvents.subList(treeBefore, treeEvents.size()));
        }
        Collections.sort(treeAfter);
        System.out.println("treeCache with nothing changed " + treeAfter);

        stop.set(true);
        contending.join();
        watchdog.join();
        // The copy renumbers zxids (docs/migration.md, "Zxids"): the lock node is the same by its
        // name and owner, not by its czxid.
        List<String> lockNodes = holder.getChildren().forPath("/mig/lock");
        Stat now = holder.checkExists().forPath("/mig/lock/" + lockNode);
        System.out.println("mutex held=" + mutex.isAcquiredInThisProcess() + " lockNodes=" + lockNodes.size()
                + " sameNode=" + (now != null && now.getEphemeralOwner() == sessions.get("holder"))
                + " contenderGot=" + contenderGot.get());
        System.out.println("leaderLatch leader=" + leader.hasLeadership() + " everLost=" + (leaderLost.get()
                || notLeader.get() > 0) + " otherLed=" + otherLed.get());
        boolean same = true;
        for (Map.Entry<String, CuratorFramework> e : clients.entrySet()) {
            same &= e.getValue().getZookeeperClient().getZooKeeper().getSessionId() == sessions.get(e.getKey());
        }
        System.out.println("sessions same=" + same);
        synchronized (states) {
            System.out.println("states " + states);
        }
        released.set(true);
        mutex.release();
        leader.close();
        System.out.println("afterRelease contenderGot=" + contended.acquire(WAIT_MILLIS, TimeUnit.MILLISECONDS)
                + " leader=" + other.await(WAIT_MILLIS, TimeUnit.MILLISECONDS));
        contended.release();
        other.close();
    }

    // byNode groups events by the node they are about ("initialized" by itself), each node's in
    // the order given.
    static Map<String, List<String>> byNode(List<String> events) {
        Map<String, List<String>> nodes = new TreeMap<>();
        synchronized (events) {
            for (String e : events) {
                String[] words = e.split(" ");
                String node = words.length > 1 ? words[1].split("=")[0] : e;
                nodes.computeIfAbsent(node, k -> new ArrayList<>()).add(e);
            }
        }
        return nodes;
    }

    interface Change {
        void make() throws Exception;
    }

    // change makes a change and waits until the cache has seen it.
    static void change(Change c, String event) throws Exception {
        c.make();
        made.add(event);
        awaitEvents();
    }

    // awaitEvents waits until the cache has seen as many events as were made.
    static void awaitEvents() {
        long deadline = System.currentTimeMillis() + WAIT_MILLIS;
        while (events.size() < made.size() && System.currentTimeMillis() < deadline) {
            sleep(5);
        }
    }

    static CuratorFramework client(String name) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.builder().connectString(addr).sessionTimeoutMs(15000)
                .connectionTimeoutMs(10000).retryPolicy(new RetryNTimes(100, 100))
                .connectionStateErrorPolicy(new SessionConnectionStateErrorPolicy()).build();
        List<String> seen = new ArrayList<>();
        synchronized (states) {
            states.put(name, seen);
        }
        c.getConnectionStateListenable().addListener((cl, st) -> {
            synchronized (states) {
                seen.add(st.toString());
            }
        });
        c.start();
        if (!c.blockUntilConnected((int) WAIT_MILLIS, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("no session with " + addr);
        }
        clients.put(name, c);
        return c;
    }

    static Thread thread(Runnable r) {
        Thread t = new Thread(r);
        t.setDaemon(true);
        t.start();
        return t;
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            throw new RuntimeException(e);
        }
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String string(byte[] b) {
        return b == null ? "null" : new String(b, StandardCharsets.UTF_8);
    }
}
