// A Kafka client against a two-broker cluster whose brokers keep their metadata in ZooKeeper
// (args: bootstrap servers, mode), for integration/kafka_test.go. In mode "failover" it creates a topic replicated on both
// brokers, produces 100 records with acks=all, prints "ready" and waits for a line on stdin (the
// test kills a broker meanwhile), produces 100 more, and reads every partition back from the
// beginning. It prints "ready" again and waits (the test restarts the broker), sees the broker
// back in every partition's ISR, changes a topic config, and deletes the topic: the controller
// and the brokers learn of each through ZooKeeper (sequential change notifications, watches).
// Each line it prints states an outcome that does not depend on timing; a step that does not
// finish in time prints a FAIL line and the program exits 1.
//
// In mode "pause" it produces 100 records, prints "ready" and waits (the test pauses the etcd
// leader meanwhile), produces 100 more with both brokers in every ISR, and reads all 200 back.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class KafkaFailover {
    static final String TOPIC = "zetcd-failover";
    static final long WAIT_MS = 90_000;

    public static void main(String[] args) {
        String bootstrap = args[0];
        boolean pause = args[1].equals("pause");
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            admin.createTopics(List.of(new NewTopic(TOPIC, 2, (short) 2))).all().get(WAIT_MS, TimeUnit.MILLISECONDS);
            awaitLeaders(admin, 2);
            System.out.println("topic partitions=2 replicas=2");
            try (KafkaProducer<String, String> p = producer(bootstrap)) {
                System.out.println("produced " + produce(p, 0, 100));
                System.out.println("ready");
                System.out.flush();
                new BufferedReader(new InputStreamReader(System.in)).readLine();
                System.out.println("produced " + produce(p, 100, 200));
            }
            if (pause) {
                System.out.println("after the pause: isr sizes " + awaitLeaders(admin, 2));
                System.out.println("consumed " + consume(bootstrap, 200));
                System.exit(0);
            }
            Set<Integer> isr = awaitLeaders(admin, 1);
            System.out.println("after the kill: leaders on one broker, isr sizes " + isr);
            System.out.println("consumed " + consume(bootstrap, 200));
            System.out.println("ready");
            System.out.flush();
            new BufferedReader(new InputStreamReader(System.in)).readLine();
            System.out.println("after the restart: isr sizes " + awaitLeaders(admin, 2));
            System.out.println("config " + alterConfig(admin));
            admin.deleteTopics(List.of(TOPIC)).all().get(WAIT_MS, TimeUnit.MILLISECONDS);
            System.out.println("deleted " + awaitDeleted(admin));
        } catch (Throwable e) {
            System.out.println("FAIL " + e);
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    // awaitLeaders waits until every partition of the topic has a leader among brokers brokers
    // that the controller knows are alive, and returns the sizes of the partitions' ISRs.
    static Set<Integer> awaitLeaders(Admin admin, int brokers) throws Exception {
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (true) {
            int alive = admin.describeCluster().nodes().get().size();
            TopicDescription d = admin.describeTopics(List.of(TOPIC)).allTopicNames().get().get(TOPIC);
            Set<Integer> leaders = new TreeSet<>(), isr = new TreeSet<>();
            boolean led = true;
            for (TopicPartitionInfo p : d.partitions()) {
                led &= p.leader() != null && !p.leader().isEmpty();
                if (led) {
                    leaders.add(p.leader().id());
                }
                isr.add(p.isr().size());
            }
            if (alive == brokers && led && (brokers == 2 || leaders.size() == 1) && isr.equals(Set.of(brokers))) {
                return isr;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("partitions " + d.partitions() + " with " + alive + " brokers alive");
            }
            Thread.sleep(200);
        }
    }

    // alterConfig sets the topic's retention.ms and waits until the brokers report it.
    static String alterConfig(Admin admin) throws Exception {
        ConfigResource topic = new ConfigResource(ConfigResource.Type.TOPIC, TOPIC);
        AlterConfigOp op = new AlterConfigOp(new ConfigEntry("retention.ms", "12345"), AlterConfigOp.OpType.SET);
        admin.incrementalAlterConfigs(Map.of(topic, List.of(op))).all().get(WAIT_MS, TimeUnit.MILLISECONDS);
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (true) {
            Config c = admin.describeConfigs(List.of(topic)).all().get().get(topic);
            String v = c.get("retention.ms").value();
            if (v.equals("12345")) {
                return "retention.ms=" + v;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("retention.ms is " + v);
            }
            Thread.sleep(200);
        }
    }

    // awaitDeleted waits until the topic is no longer listed.
    static boolean awaitDeleted(Admin admin) throws Exception {
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (admin.listTopics().names().get().contains(TOPIC)) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("the topic is still listed");
            }
            Thread.sleep(200);
        }
        return true;
    }

    static KafkaProducer<String, String> producer(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("delivery.timeout.ms", Long.toString(WAIT_MS));
        p.put("request.timeout.ms", "10000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    // produce sends records from to to-1 and returns how many were acknowledged.
    static int produce(KafkaProducer<String, String> p, int from, int to) throws Exception {
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        for (int i = from; i < to; i++) {
            sent.add(p.send(new ProducerRecord<>(TOPIC, "k" + i, "m" + i)));
        }
        p.flush();
        int acked = 0;
        for (Future<RecordMetadata> f : sent) {
            f.get(WAIT_MS, TimeUnit.MILLISECONDS);
            acked++;
        }
        return acked;
    }

    // consume reads both partitions from the beginning until it has want records, and says how
    // many it read and how many distinct values.
    static String consume(String bootstrap, int want) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> parts = List.of(new TopicPartition(TOPIC, 0), new TopicPartition(TOPIC, 1));
            c.assign(parts);
            c.seekToBeginning(parts);
            List<String> values = new ArrayList<>();
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (values.size() < want && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    values.add(r.value());
                }
            }
            return values.size() + " distinct " + new TreeSet<>(values).size();
        }
    }
}
