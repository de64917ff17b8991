// ZooKeeper's Java client holding many watches across a move between servers (args: connect
// string), for integration/watches_java_test.go. It sets a
// data watch on each of 5,000 nodes with long names, an exists watch on each of 1,000 absent ones
// and a child watch on their parent, prints "ready" and its session id, and waits for a line on
// stdin while the test stops the server it is on. When it has reconnected, the client has sent its
// watches again, in several setWatches frames of at most 128 KB (the Java client's batching);
// another session then changes every watched node, and every watch must fire once.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;

public class ManyWatches {
    static final int DATA = 5000, ABSENT = 1000;
    static final String ROOT = "/many-watches";

    static String name(String kind, int i) {
        // 40 characters and more a path: 6,000 of them take more than one 128 KB setWatches.
        return String.format("%s/%s-with-a-name-long-enough-to-fill-frames-%05d", ROOT, kind, i);
    }

    public static void main(String[] args) throws Exception {
        Set<String> fired = ConcurrentHashMap.newKeySet();
        AtomicInteger duplicates = new AtomicInteger(), connects = new AtomicInteger();
        List<String> states = new ArrayList<>();
        int want = DATA + ABSENT + 1;
        CountDownLatch all = new CountDownLatch(want);
        Watcher w = (WatchedEvent e) -> {
            if (e.getType() == Watcher.Event.EventType.None) {
                synchronized (states) {
                    states.add(e.getState().toString());
                }
                if (e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                    connects.incrementAndGet();
                }
                return;
            }
            if (fired.add(e.getType() + " " + e.getPath())) {
                all.countDown();
            } else {
                duplicates.incrementAndGet();
            }
        };
        ZooKeeper zk = new ZooKeeper(args[0], 10000, w);
        ZooKeeper writer = new ZooKeeper(args[0], 10000, e -> { });
        awaitConnected(zk);
        awaitConnected(writer);
        writer.create(ROOT, new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        for (int i = 0; i < DATA; i += 500) {
            List<Op> ops = new ArrayList<>();
            for (int j = i; j < i + 500; j++) {
                ops.add(Op.create(name("data", j), new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
            }
            writer.multi(ops);
        }
        zk.sync(ROOT, (rc, path, ctx) -> { }, null);
        for (int i = 0; i < DATA; i++) {
            zk.getData(name("data", i), true, null);
        }
        for (int i = 0; i < ABSENT; i++) {
            zk.exists(name("absent", i), true);
        }
        zk.getChildren(ROOT, true);
        System.out.println("watches set " + want);
        System.out.println("ready 0x" + Long.toHexString(zk.getSessionId()));
        System.out.flush();
        long session = zk.getSessionId();
        new BufferedReader(new InputStreamReader(System.in)).readLine();

        long deadline = System.currentTimeMillis() + 30_000;
        while (connects.get() < 2 && System.currentTimeMillis() < deadline) {
            Thread.sleep(20);
        }
        // The writer may have been on the stopped server too.
        awaitConnected(writer);
        for (int i = 0; i < DATA; i += 500) {
            List<Op> ops = new ArrayList<>();
            for (int j = i; j < i + 500; j++) {
                ops.add(Op.setData(name("data", j), new byte[] {1}, -1));
            }
            writer.multi(ops);
        }
        for (int i = 0; i < ABSENT; i += 500) {
            List<Op> ops = new ArrayList<>();
            for (int j = i; j < i + 500; j++) {
                ops.add(Op.create(name("absent", j), new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
            }
            writer.multi(ops);
        }
        boolean done = all.await(60, TimeUnit.SECONDS);
        synchronized (states) {
            System.out.println("states " + states);
        }
        System.out.println("sameSession " + (zk.getSessionId() == session));
        System.out.println("fired " + (want - all.getCount()) + " of " + want + " duplicates " + duplicates.get());
        zk.close();
        writer.close();
        System.exit(done ? 0 : 1);
    }

    static void awaitConnected(ZooKeeper zk) throws InterruptedException {
        long deadline = System.currentTimeMillis() + 30_000;
        while (!zk.getState().isConnected()) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("no session");
            }
            Thread.sleep(20);
        }
    }
}
