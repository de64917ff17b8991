package zetcd.oracle;

import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.BiConsumer;
import org.apache.zookeeper.metrics.Counter;
import org.apache.zookeeper.metrics.CounterSet;
import org.apache.zookeeper.metrics.Gauge;
import org.apache.zookeeper.metrics.GaugeSet;
import org.apache.zookeeper.metrics.MetricsContext;
import org.apache.zookeeper.metrics.MetricsProvider;
import org.apache.zookeeper.metrics.Summary;
import org.apache.zookeeper.metrics.SummarySet;

/**
 * A ZooKeeper MetricsProvider that records the kind of every metric the server registers
 * (ServerMetrics, ZooKeeperServer's gauges) and reports the kinds through dump, so that mntr
 * answers one line "zk_metric_kind.NAME" TAB KIND per metric. zetcd's tests compare the names,
 * types and labels zetcd exports under ZooKeeper's names with these registrations: what a
 * PrometheusMetricsProvider exports follows from the kind (integration/zkmetrics_test.go).
 * Values are not kept, but a counter's, which Counter.get must answer.
 *
 * The kinds: gauge, gauge_set, counter, counter_set, summary_basic, summary_advanced,
 * summary_set_basic, summary_set_advanced (the sets have a label "key" in Prometheus).
 *
 * Compiled by the test against ZooKeeper's jars; zoo.cfg names it with
 * metricsProvider.className=zetcd.oracle.RegistrationsProvider.
 */
public final class RegistrationsProvider implements MetricsProvider {
    private final Map<String, String> kinds = new ConcurrentHashMap<>();

    private final MetricsContext root = new MetricsContext() {
        @Override
        public MetricsContext getContext(String name) {
            return this;
        }

        @Override
        public Counter getCounter(String name) {
            kinds.put(name, "counter");
            LongAdder n = new LongAdder();
            return new Counter() {
                @Override
                public void add(long delta) {
                    n.add(delta);
                }

                @Override
                public long get() {
                    return n.sum();
                }
            };
        }

        @Override
        public CounterSet getCounterSet(String name) {
            kinds.put(name, "counter_set");
            return (key, delta) -> { };
        }

        @Override
        public void registerGauge(String name, Gauge gauge) {
            kinds.put(name, "gauge");
        }

        @Override
        public void unregisterGauge(String name) {
        }

        @Override
        public void registerGaugeSet(String name, GaugeSet gaugeSet) {
            kinds.put(name, "gauge_set");
        }

        @Override
        public void unregisterGaugeSet(String name) {
        }

        @Override
        public Summary getSummary(String name, DetailLevel level) {
            kinds.put(name, level == DetailLevel.ADVANCED ? "summary_advanced" : "summary_basic");
            return value -> { };
        }

        @Override
        public SummarySet getSummarySet(String name, DetailLevel level) {
            kinds.put(name, level == DetailLevel.ADVANCED ? "summary_set_advanced" : "summary_set_basic");
            return (key, value) -> { };
        }
    };

    @Override
    public void configure(Properties configuration) {
    }

    @Override
    public void start() {
    }

    @Override
    public MetricsContext getRootContext() {
        return root;
    }

    @Override
    public void stop() {
    }

    @Override
    public void dump(BiConsumer<String, Object> sink) {
        new TreeMap<>(kinds).forEach((name, kind) -> sink.accept("metric_kind." + name, kind));
    }

    @Override
    public void resetAllValues() {
    }
}
