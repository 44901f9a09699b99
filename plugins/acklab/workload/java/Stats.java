package dev.acklab;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;

/**
 * The producer's statistics, sampled every stats.interval.ms on a daemon thread until stopped, one CSV
 * line each (the fields of acklab.workload.java_worker.STATS_FIELDS after ts): ts, txmsgs, txretries,
 * txerrs, req_timeouts, disconnects, msg_cnt, outbuf_cnt, outbuf_msg_cnt, waitresp_cnt,
 * waitresp_msg_cnt, request_latency_avg_ms, request_latency_max_ms (empty where the Java client has no
 * such metric).
 */
final class Stats {
    private final KafkaProducer<byte[], byte[]> producer;
    private final SendLoop loop;
    private final SendLog log;
    private final long intervalMs;
    private final List<String> lines = new ArrayList<>();
    private volatile boolean stopped;

    Stats(KafkaProducer<byte[], byte[]> producer, SendLoop loop, SendLog log, long intervalMs) {
        this.producer = producer;
        this.loop = loop;
        this.log = log;
        this.intervalMs = intervalMs;
    }

    void start() {
        Thread sampler = new Thread(this::sample, "acklab-stats");
        sampler.setDaemon(true);
        sampler.start();
    }

    /** No more samples from the thread (the producer is about to close). */
    void stop() {
        stopped = true;
    }

    private void sample() {
        while (!stopped) {
            try {
                Thread.sleep(intervalMs);
            } catch (InterruptedException e) {
                return;
            }
            if (!stopped) {
                sampleOnce();
            }
        }
    }

    synchronized void sampleOnce() {
        Map<String, Double> values = new HashMap<>();
        for (Map.Entry<MetricName, ? extends Metric> entry : producer.metrics().entrySet()) {
            MetricName name = entry.getKey();
            if (name.group().equals("producer-metrics")) {
                Object value = entry.getValue().metricValue();
                if (value instanceof Number) {
                    values.put(name.name(), ((Number) value).doubleValue());
                }
            }
        }
        lines.add(String.join(",",
            Double.toString(Clock.now()),
            metric(values, "record-send-total"),
            metric(values, "record-retry-total"),
            metric(values, "record-error-total"),
            "",
            metric(values, "connection-close-total"),
            Long.toString(loop.sent - log.reported.get()),
            "",
            "",
            metric(values, "requests-in-flight"),
            "",
            metric(values, "request-latency-avg"),
            metric(values, "request-latency-max")));
    }

    private static String metric(Map<String, Double> values, String name) {
        Double value = values.get(name);
        return value == null || value.isNaN() || value.isInfinite() ? "" : Long.toString(Math.round(value));
    }

    synchronized void write(Path path) throws IOException {
        Files.write(path, lines, StandardCharsets.UTF_8);
    }
}
