// A Kafka client of a three-broker cluster that moves from ZooKeeper to zetcd while it runs
// (args: bootstrap servers), for integration/clients/kafka_migrate_test.go. It creates a topic
// of three partitions, each on all three brokers, with min.insync.replicas=2, and produces
// numbered records with acks=all, one every 10 ms, from then until the test says "go",
// remembering which the brokers acknowledged. Meanwhile each other line the test sends is
// answered "ready <line> acknowledged <n> failed <n>": the producer's progress at that moment.
// After "go" it stops producing, reads every partition back from the beginning and says whether
// every acknowledged record is there. Then it creates a second topic, prints "ready created"
// and waits for a line (the test looks at its znodes), deletes it and waits until no broker
// lists it. A step that does not finish in time prints a FAIL line and the program exits 1.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class KafkaMigration {
    static final String TOPIC = "zetcd-migration";
    static final String LATER = "zetcd-migration-later";
    static final int PARTITIONS = 3;
    static final long WAIT_MS = 90_000;

    static final Set<Integer> acked = new ConcurrentSkipListSet<>();
    static final AtomicInteger failed = new AtomicInteger();
    static final AtomicReference<Exception> firstFailure = new AtomicReference<>();

    public static void main(String[] args) {
        String bootstrap = args[0];
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            NewTopic topic = new NewTopic(TOPIC, PARTITIONS, (short) 3).configs(Map.of("min.insync.replicas", "2"));
            admin.createTopics(List.of(topic)).all().get(WAIT_MS, TimeUnit.MILLISECONDS);
            awaitFullIsr(admin, TOPIC);
            System.out.println("topic " + TOPIC + " partitions=3 replicas=3 min.insync.replicas=2");
            int sent = produceUntilGo(bootstrap, in);
            System.out.println("stopped producing: sent " + sent + ", acknowledged " + acked.size() + ", failed " + failed.get()
                    + (firstFailure.get() == null ? "" : ", first failure " + firstFailure.get()));
            System.out.println(consume(bootstrap));

            admin.createTopics(List.of(new NewTopic(LATER, 1, (short) 3))).all().get(WAIT_MS, TimeUnit.MILLISECONDS);
            awaitFullIsr(admin, LATER);
            System.out.println("ready created " + LATER);
            System.out.flush();
            in.readLine();
            admin.deleteTopics(List.of(LATER)).all().get(WAIT_MS, TimeUnit.MILLISECONDS);
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (admin.listTopics().names().get().contains(LATER)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException(LATER + " is still listed");
                }
                Thread.sleep(200);
            }
            System.out.println("deleted " + LATER);
        } catch (Throwable e) {
            System.out.println("FAIL " + e);
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    // produceUntilGo sends record i ("m<i>", i from 0) every 10 ms on a thread of its own until
    // the test's "go", answering the test's other lines with the progress; it returns how many
    // it sent, every one of them acknowledged or failed by then.
    static int produceUntilGo(String bootstrap, BufferedReader in) throws Exception {
        AtomicInteger next = new AtomicInteger();
        Thread sender;
        try (KafkaProducer<String, String> p = producer(bootstrap)) {
            sender = new Thread(() -> {
                while (!Thread.currentThread().isInterrupted()) {
                    int i = next.get();
                    try {
                        p.send(new ProducerRecord<>(TOPIC, "k" + i, "m" + i), (md, e) -> {
                            if (e == null) {
                                acked.add(i);
                            } else {
                                failed.incrementAndGet();
                                firstFailure.compareAndSet(null, e);
                            }
                        });
                        next.incrementAndGet();
                        Thread.sleep(10);
                    } catch (InterruptedException | InterruptException e) {
                        return;
                    }
                }
            });
            sender.start();
            System.out.println("ready producing");
            System.out.flush();
            for (String line = in.readLine(); line != null && !line.equals("go"); line = in.readLine()) {
                System.out.println("ready " + line + " acknowledged " + acked.size() + " failed " + failed.get());
                System.out.flush();
            }
            sender.interrupt();
            sender.join();
            p.flush();
        }
        return next.get();
    }

    // awaitFullIsr waits until every partition of topic has a leader and all three brokers in
    // its ISR. A broker learns of a new topic from the controller some time after the one that
    // created it: until then it answers that it does not know the topic.
    static void awaitFullIsr(Admin admin, String topic) throws Exception {
        long deadline = System.currentTimeMillis() + WAIT_MS;
        String last = "";
        while (true) {
            try {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                boolean full = true;
                for (TopicPartitionInfo p : d.partitions()) {
                    full &= p.leader() != null && !p.leader().isEmpty() && p.isr().size() == 3;
                }
                if (full) {
                    return;
                }
                last = "partitions " + d.partitions();
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof UnknownTopicOrPartitionException)) {
                    throw e;
                }
                last = e.getCause().toString();
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException(topic + ": " + last);
            }
            Thread.sleep(200);
        }
    }

    static KafkaProducer<String, String> producer(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("delivery.timeout.ms", "120000");
        p.put("request.timeout.ms", "10000");
        p.put("linger.ms", "5");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    // consume reads every partition from the beginning to its end and says how many records it
    // read and which acknowledged records it did not find.
    static String consume(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> parts = new ArrayList<>();
            for (int i = 0; i < PARTITIONS; i++) {
                parts.add(new TopicPartition(TOPIC, i));
            }
            c.assign(parts);
            c.seekToBeginning(parts);
            Map<TopicPartition, Long> end = c.endOffsets(parts, Duration.ofMillis(WAIT_MS));
            Set<Integer> seen = new TreeSet<>();
            int records = 0;
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (!atEnd(c, end) && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    seen.add(Integer.parseInt(r.value().substring(1)));
                    records++;
                }
            }
            List<Integer> missing = new ArrayList<>();
            for (int i : acked) {
                if (!seen.contains(i)) {
                    missing.add(i);
                }
            }
            return "consumed " + records + " records, " + seen.size() + " distinct; acknowledged " + acked.size()
                    + ", missing " + missing.size() + (missing.isEmpty() ? "" : " " + missing.subList(0, Math.min(20, missing.size())));
        }
    }

    static boolean atEnd(KafkaConsumer<String, String> c, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
            if (c.position(e.getKey()) < e.getValue()) {
                return false;
            }
        }
        return true;
    }
}
