import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher.Event.KeeperState;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.ClientInfo;

// SaslClient drives the ZooKeeper 3.9 Java client against a server, with or without SASL (the
// JAAS Client section and zookeeper.sasl.client come from the JVM's system properties), and
// prints one line per step, so that a test can compare what zetcd and ZooKeeper answer.
//
//   java -cp <zookeeper jars> SaslClient.java <host:port,...> <owner|other|failed|move> <path>
//
// move: as owner, then prints "ready" and waits for a line on stdin (the test stops the server
// the client is connected to meanwhile), then prints the states seen until the client has
// authenticated again on another server, and writes.
// owner: waits for SaslAuthenticated, creates <path> as Kafka does with zookeeper.set.acl
// (CREATOR_ALL_ACL and world READ), lists its ACL and whoAmI, writes it, and creates a child.
// other: writes <path> and creates a child under it (refused unless authenticated as its
// owner), reads it. failed: prints the session states seen and what a read then gets.
public class SaslClient {
    public static void main(String[] args) throws Exception {
        String addr = args[0], mode = args[1], path = args[2];
        BlockingQueue<KeeperState> states = new LinkedBlockingQueue<>();
        ZooKeeper zk = new ZooKeeper(addr, 10000, e -> {
            if (e.getType() == org.apache.zookeeper.Watcher.Event.EventType.None) {
                states.add(e.getState());
            }
        });
        List<String> seen = new ArrayList<>();
        KeeperState want = mode.equals("other") ? KeeperState.SyncConnected : KeeperState.SaslAuthenticated;
        while (true) {
            KeeperState s = states.poll(20, TimeUnit.SECONDS);
            if (s == null) {
                seen.add("timeout");
                break;
            }
            seen.add(s.toString());
            if (s == want || s == KeeperState.AuthFailed) {
                break;
            }
        }
        System.out.println("states " + String.join(",", seen));
        switch (mode) {
            case "owner":
                List<ACL> acl = new ArrayList<>(ZooDefs.Ids.CREATOR_ALL_ACL);
                acl.addAll(ZooDefs.Ids.READ_ACL_UNSAFE);
                step("create", () -> zk.create(path, "v".getBytes(), acl, CreateMode.PERSISTENT));
                step("getACL", () -> {
                    StringBuilder b = new StringBuilder();
                    for (ACL a : zk.getACL(path, null)) {
                        b.append(a.getId().getScheme()).append(':').append(a.getId().getId()).append('=').append(a.getPerms()).append(' ');
                    }
                    return b.toString().trim();
                });
                step("whoAmI", () -> whoAmI(zk));
                step("setData", () -> zk.setData(path, "w".getBytes(), -1).getVersion());
                step("createChild", () -> zk.create(path + "/c", null, acl, CreateMode.PERSISTENT));
                break;
            case "other":
                step("setData", () -> zk.setData(path, "x".getBytes(), -1).getVersion());
                step("createChild", () -> zk.create(path + "/x", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
                step("delete", () -> { zk.delete(path + "/c", -1); return "deleted"; });
                step("getData", () -> new String(zk.getData(path, false, null)));
                break;
            case "failed":
                step("exists", () -> zk.exists("/", false) != null);
                break;
            case "move":
                step("create", () -> zk.create(path, "v".getBytes(), ZooDefs.Ids.CREATOR_ALL_ACL, CreateMode.PERSISTENT));
                step("createEphemeral", () -> zk.create(path + "/e", null, ZooDefs.Ids.CREATOR_ALL_ACL, CreateMode.EPHEMERAL));
                long session = zk.getSessionId();
                System.out.println("ready");
                System.out.flush();
                new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine();
                List<String> again = new ArrayList<>();
                while (true) {
                    KeeperState s = states.poll(30, TimeUnit.SECONDS);
                    if (s == null) {
                        again.add("timeout");
                        break;
                    }
                    again.add(s.toString());
                    if (s == KeeperState.SaslAuthenticated || s == KeeperState.AuthFailed || s == KeeperState.Expired) {
                        break;
                    }
                }
                System.out.println("states " + String.join(",", again));
                System.out.println("sameSession " + (zk.getSessionId() == session));
                step("whoAmI", () -> whoAmI(zk));
                step("setData", () -> zk.setData(path, "w".getBytes(), -1).getVersion());
                step("ephemeral", () -> zk.exists(path + "/e", false) != null);
                break;
        }
        zk.close();
    }

    interface Step {
        Object run() throws Exception;
    }

    static void step(String name, Step s) {
        try {
            System.out.println(name + " " + s.run());
        } catch (KeeperException e) {
            System.out.println(name + " " + e.code());
        } catch (Exception e) {
            System.out.println(name + " " + e.getClass().getSimpleName());
        }
    }

    // whoAmI renders the connection's identities as "scheme:user ...".
    static String whoAmI(ZooKeeper zk) throws Exception {
        StringBuilder b = new StringBuilder();
        for (ClientInfo ci : zk.whoAmI()) {
            b.append(ci.getAuthScheme()).append(':').append(ci.getUser()).append(' ');
        }
        return b.toString().trim();
    }
}
