// Curator's EnsembleTracker against zetcd processes (args: connect string, mode, seconds), for
// integration/clients/ensemble_test.go. Curator reads /zookeeper/config (getConfig) and, when it
// lists servers, replaces the client's connect string with their client addresses.
//
// Modes: "published" starts with one server's address and prints what it learned, once the
// connect string lists as many servers as /zookeeper/config; it prints "ready" and its session's
// id, and waits for a line on stdin (meanwhile the test stops the first server), then writes and
// reads, prints "ready" again and waits for a line naming a server's address (one the test
// started since) until the connect string lists it and not the first. "unpublished" waits the
// given seconds and prints whether the connect string is still the one it was started with.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.CreateMode;

public class CuratorEnsemble {
    static final long WAIT_MILLIS = 60_000;

    public static void main(String[] args) throws Exception {
        String addr = args[0];
        CuratorFramework c = CuratorFrameworkFactory.newClient(addr, 10000, 5000, new RetryNTimes(20, 500));
        try {
            c.start();
            if (!c.blockUntilConnected(30, TimeUnit.SECONDS)) {
                throw new IllegalStateException("no session with " + addr);
            }
            if (args[1].equals("published")) {
                published(c, addr);
            } else {
                Thread.sleep(Long.parseLong(args[2]) * 1000);
                byte[] config = c.getConfig().forEnsemble();
                System.out.println("unpublished connectString=" + (connectString(c).equals(addr) ? "unchanged" : connectString(c))
                        + " config=" + config.length + "B");
            }
        } catch (Throwable e) {
            System.out.println("FAIL " + e);
            e.printStackTrace();
            System.exit(1);
        } finally {
            c.close();
        }
        System.exit(0);
    }

    static void published(CuratorFramework c, String first) throws Exception {
        long session = c.getZookeeperClient().getZooKeeper().getSessionId();
        byte[] config = c.getConfig().forEnsemble();
        long listed = new String(config, StandardCharsets.UTF_8).lines().filter(l -> l.startsWith("server.")).count();
        List<String> servers = awaitServers(c, s -> s.size() == listed);
        System.out.println("published learned=" + servers.size() + " includesFirst=" + servers.contains(first));
        System.out.println("ready 0x" + Long.toHexString(session));
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        in.readLine();
        // The first server is gone: the session goes on on one the client learned.
        c.create().orSetData().creatingParentsIfNeeded().withMode(CreateMode.EPHEMERAL).forPath("/ensemble/after", "1".getBytes(StandardCharsets.UTF_8));
        String data = new String(c.getData().forPath("/ensemble/after"), StandardCharsets.UTF_8);
        System.out.println("published afterStop data=" + data + " sameSession="
                + (c.getZookeeperClient().getZooKeeper().getSessionId() == session));
        System.out.println("ready 2");
        System.out.flush();
        String next = in.readLine();
        servers = awaitServers(c, s -> s.contains(next) && !s.contains(first));
        System.out.println("published learnedNew=true forgotFirst=true servers=" + servers.size()
                + " sameSession=" + (c.getZookeeperClient().getZooKeeper().getSessionId() == session));
    }

    static String connectString(CuratorFramework c) {
        return c.getZookeeperClient().getCurrentConnectionString();
    }

    // awaitServers waits until the client's connect string satisfies ok, and returns its servers.
    static List<String> awaitServers(CuratorFramework c, java.util.function.Predicate<List<String>> ok) throws Exception {
        long deadline = System.currentTimeMillis() + WAIT_MILLIS;
        while (true) {
            List<String> servers = Arrays.asList(connectString(c).split(","));
            if (ok.test(servers)) {
                return servers;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("connect string " + servers + " after " + WAIT_MILLIS + " ms");
            }
            Thread.sleep(100);
        }
    }
}
