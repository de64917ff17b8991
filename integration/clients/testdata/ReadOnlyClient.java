import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;

/**
 * ZooKeeper's Java client with canBeReadOnly against a server that serves read-only sessions
 * now: prints one line per step, and, after "waiting for read-write", waits for the client to be
 * connected read-write again (the test brings etcd's quorum back then) and writes.
 *
 *     java ReadOnlyClient.java host:port path
 *
 * path holds "there" before the program starts.
 */
public class ReadOnlyClient {
    static final int WAIT_SECONDS = 90; // bounds a hang, not a speed

    public static void main(String[] args) throws Exception {
        String addr = args[0], path = args[1];
        BlockingQueue<Watcher.Event.KeeperState> states = new LinkedBlockingQueue<>();
        ZooKeeper zk = new ZooKeeper(addr, 10000, e -> {
            if (e.getType() == Watcher.Event.EventType.None) {
                states.add(e.getState());
            }
        }, true);
        System.out.println("state " + await(states, Watcher.Event.KeeperState.ConnectedReadOnly));
        System.out.println("get " + new String(zk.getData(path, false, null)));
        try {
            zk.create(path + "/new", "x".getBytes(), ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            System.out.println("create ok");
        } catch (KeeperException.NotReadOnlyException e) {
            System.out.println("create NotReadOnly");
        }
        System.out.println("waiting for read-write");
        System.out.flush();
        System.out.println("state " + await(states, Watcher.Event.KeeperState.SyncConnected));
        zk.create(path + "/after", "x".getBytes(), ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        System.out.println("create after ok");
        zk.close();
    }

    /** await returns want once the client reaches it, or the last state seen after WAIT_SECONDS. */
    static Watcher.Event.KeeperState await(BlockingQueue<Watcher.Event.KeeperState> states, Watcher.Event.KeeperState want)
            throws InterruptedException {
        Watcher.Event.KeeperState last = null;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
        while (System.nanoTime() < deadline) {
            Watcher.Event.KeeperState s = states.poll(deadline - System.nanoTime(), TimeUnit.NANOSECONDS);
            if (s == null) {
                break;
            }
            last = s;
            if (s == want) {
                return s;
            }
        }
        return last;
    }
}
