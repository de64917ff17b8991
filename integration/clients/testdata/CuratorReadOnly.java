import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.RetryForever;
import org.apache.zookeeper.KeeperException;

/**
 * Curator with canBeReadOnly(true) against a server that serves read-only sessions now: prints
 * one line per step, and, after "waiting for read-write", waits for Curator to report the
 * connection read-write again (the test brings the quorum back then) and writes.
 *
 *     java CuratorReadOnly.java host:port path
 *
 * path holds "there" before the program starts.
 */
public class CuratorReadOnly {
    static final int WAIT_SECONDS = 90; // bounds a hang, not a speed

    public static void main(String[] args) throws Exception {
        String addr = args[0], path = args[1];
        BlockingQueue<ConnectionState> states = new LinkedBlockingQueue<>();
        CuratorFramework cf = CuratorFrameworkFactory.builder()
                .connectString(addr)
                .sessionTimeoutMs(10000)
                .connectionTimeoutMs(10000)
                .canBeReadOnly(true)
                .retryPolicy(new RetryForever(200))
                .build();
        cf.getConnectionStateListenable().addListener((c, s) -> states.add(s));
        cf.start();
        System.out.println("state " + await(states, ConnectionState.READ_ONLY));
        System.out.println("get " + new String(cf.getData().forPath(path)));
        try {
            cf.create().forPath(path + "/new", "x".getBytes());
            System.out.println("create ok");
        } catch (KeeperException.NotReadOnlyException e) {
            System.out.println("create NotReadOnly");
        }
        System.out.println("waiting for read-write");
        System.out.flush();
        ConnectionState back = awaitReadWrite(states);
        System.out.println("state " + back);
        cf.create().forPath(path + "/after", "x".getBytes());
        System.out.println("create after ok");
        cf.close();
    }

    /**
     * awaitReadWrite returns the first state Curator reports that is connected read-write
     * (isConnected and not READ_ONLY), or the last state seen after WAIT_SECONDS.
     */
    static ConnectionState awaitReadWrite(BlockingQueue<ConnectionState> states) throws InterruptedException {
        ConnectionState last = null;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
        while (System.nanoTime() < deadline) {
            ConnectionState s = states.poll(deadline - System.nanoTime(), TimeUnit.NANOSECONDS);
            if (s == null) {
                break;
            }
            last = s;
            if (s.isConnected() && s != ConnectionState.READ_ONLY) {
                return s;
            }
        }
        return last;
    }

    /** await returns want once Curator reports it, or the last state seen after WAIT_SECONDS. */
    static ConnectionState await(BlockingQueue<ConnectionState> states, ConnectionState want) throws InterruptedException {
        ConnectionState last = null;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
        while (System.nanoTime() < deadline) {
            ConnectionState s = states.poll(deadline - System.nanoTime(), TimeUnit.NANOSECONDS);
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
