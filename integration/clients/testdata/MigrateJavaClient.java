// ZooKeeper's Java client across a migration's cutover (args: connect string of a zetcd in
// migration mode), for integration/clients/migrate_java_test.go. A session creates an
// ephemeral and sets a data, a child and an exists watch; a second session, the writer, changes
// nodes before. It prints "ready" and the first session's id, and waits for a line on stdin
// while the test cuts over and stops ZooKeeper. It then reads again, lets the writer change the
// watched nodes, and prints what a user of the client relies on, in lines that do not depend on
// timing, and "afterWriteZxid" with the zxid of the writer's first write after the cutover.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;

public class MigrateJavaClient {
    static final long WAIT_SECONDS = 60, SETTLE_MILLIS = 500;

    public static void main(String[] args) throws Exception {
        List<String> states = Collections.synchronizedList(new ArrayList<>()),
                writerStates = Collections.synchronizedList(new ArrayList<>()),
                events = Collections.synchronizedList(new ArrayList<>());
        ZooKeeper zk = connect(args[0], states), writer = connect(args[0], writerStates);
        long session = zk.getSessionId();

        List<Stat> stats = new ArrayList<>();
        writer.create("/jm", new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT, stat(stats));
        writer.create("/jm/data", bytes("v0"), ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT, stat(stats));
        for (int i = 1; i <= 3; i++) {
            stats.add(writer.setData("/jm/data", bytes("v" + i), -1));
        }
        zk.create("/jm/eph", bytes("mine"), ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL, stat(stats));
        Watcher watcher = (WatchedEvent e) -> {
            if (e.getType() != Watcher.Event.EventType.None) { // not the connection's states
                events.add(e.getType() + " " + e.getPath());
            }
        };
        Stat before = stat(stats);
        zk.getData("/jm/data", watcher, before);
        zk.getChildren("/jm", watcher, stat(stats));
        zk.exists("/jm/absent", watcher);
        long seen = 0;
        for (Stat s : stats) {
            seen = Math.max(seen, Math.max(s.getCzxid(), Math.max(s.getMzxid(), s.getPzxid())));
        }

        System.out.println("ready 0x" + Long.toHexString(session));
        System.out.flush();
        new BufferedReader(new InputStreamReader(System.in)).readLine();

        long deadline = System.currentTimeMillis() + WAIT_SECONDS * 1000;
        // The cutover closed the connections: each session reconnects, to zetcd.
        for (List<String> l : List.of(states, writerStates)) {
            while (!(l.size() >= 3 && l.get(l.size() - 1).equals("SyncConnected")) && System.currentTimeMillis() < deadline) {
                Thread.sleep(20);
            }
        }
        Stat after = new Stat();
        String data = string(zk.getData("/jm/data", false, after));
        System.out.println("read data=" + data + " sameVersion=" + (after.getVersion() == before.getVersion())
                + " mzxidNotOlder=" + (after.getMzxid() >= before.getMzxid()));
        // The client set its watches again (setWatches) before that read: any event they gave for
        // nothing changed came before its answer.
        Thread.sleep(SETTLE_MILLIS);
        System.out.println("events with nothing changed " + copy(events));

        Stat eph = writer.exists("/jm/eph", false);
        System.out.println("ephemeral kept=" + (eph != null && eph.getEphemeralOwner() == session));
        Stat written = writer.setData("/jm/data", bytes("after"), -1);
        System.out.println("write after zxidAbove=" + (written.getMzxid() > seen));
        System.out.println("afterWriteZxid 0x" + Long.toHexString(written.getMzxid()));
        writer.create("/jm/new", new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        writer.create("/jm/absent", new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        while (events.size() < 3 && System.currentTimeMillis() < deadline) {
            Thread.sleep(20);
        }
        Thread.sleep(SETTLE_MILLIS);
        List<String> fired = copy(events);
        Collections.sort(fired);
        System.out.println("fired " + fired);
        System.out.println("read after the change " + string(zk.getData("/jm/data", false, null)));
        System.out.println("session same=" + (zk.getSessionId() == session));
        System.out.println("states " + copy(states) + " " + copy(writerStates));
        zk.close();
        writer.close();
    }

    // connect opens a session whose connection states are added to states.
    static ZooKeeper connect(String addr, List<String> states) throws Exception {
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(addr, 15000, (WatchedEvent e) -> {
            if (e.getType() == Watcher.Event.EventType.None) {
                states.add(e.getState().toString());
                if (e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                    connected.countDown();
                }
            }
        });
        if (!connected.await(WAIT_SECONDS, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no session with " + addr);
        }
        return zk;
    }

    static Stat stat(List<Stat> stats) {
        Stat s = new Stat();
        stats.add(s);
        return s;
    }

    static List<String> copy(List<String> l) {
        synchronized (l) {
            return new ArrayList<>(l);
        }
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String string(byte[] b) {
        return new String(b, StandardCharsets.UTF_8);
    }
}
