package dev.acklab;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One processor instance's job: the JSON file of {@code acklab.workload.processing.ProcessorJob}
 * (the same field names; a field left out takes that model's default), parsed once.
 */
final class ProcessorJob {
    static final List<String> STYLES = Arrays.asList("eos", "at-least-once", "at-most-once", "eos-naive", "bare"); // bare: the benchmark's baseline

    final String bootstrapServers, inputTopic, outputTopic, groupId, style, transactionalId, groupProtocol, log;
    final int instance, incarnation, maxBatch;
    final long pollTimeoutMs, sessionTimeoutMs, heartbeatIntervalMs, maxPollIntervalMs, transactionTimeoutMs;
    final Map<String, String> consumerConfig, producerConfig;
    final Long parentPid; // null: none

    ProcessorJob(Map<String, Object> job) {
        bootstrapServers = text(job, "bootstrap_servers", null);
        inputTopic = text(job, "input_topic", null);
        outputTopic = text(job, "output_topic", null);
        groupId = text(job, "group_id", null);
        instance = (int) number(job, "instance", null);
        incarnation = (int) number(job, "incarnation", 0L);
        style = text(job, "style", null);
        if (!STYLES.contains(style)) {
            throw new IllegalArgumentException("processor job: style " + style + " is not one of " + STYLES);
        }
        transactionalId = job.get("transactional_id") == null ? null : text(job, "transactional_id", null);
        if (transactional() && transactionalId == null) {
            throw new IllegalArgumentException("processor job: style " + style + " needs a transactional_id");
        }
        groupProtocol = text(job, "group_protocol", "classic");
        maxBatch = (int) number(job, "max_batch", 1000L);
        pollTimeoutMs = number(job, "poll_timeout_ms", 100L);
        sessionTimeoutMs = number(job, "session_timeout_ms", 6000L);
        heartbeatIntervalMs = number(job, "heartbeat_interval_ms", 1000L);
        maxPollIntervalMs = number(job, "max_poll_interval_ms", 10000L);
        transactionTimeoutMs = number(job, "transaction_timeout_ms", 10000L);
        consumerConfig = properties(job, "consumer_config");
        producerConfig = properties(job, "producer_config");
        log = text(job, "log", null);
        parentPid = job.get("parent_pid") == null ? null : number(job, "parent_pid", null);
    }

    @SuppressWarnings("unchecked")
    static ProcessorJob read(Path path) throws IOException {
        Object parsed = Json.parse(new String(Files.readAllBytes(path), StandardCharsets.UTF_8));
        if (!(parsed instanceof Map)) {
            throw new IllegalArgumentException("processor job " + path + ": not a JSON object");
        }
        return new ProcessorJob((Map<String, Object>) parsed);
    }

    /** The styles whose output is written in transactions (processing.TRANSACTIONAL_STYLES). */
    boolean transactional() {
        return style.equals("eos") || style.equals("eos-naive");
    }

    private static Object field(Map<String, Object> job, String name, Object fallback) {
        Object value = job.containsKey(name) ? job.get(name) : fallback;
        if (value == null) {
            throw new IllegalArgumentException("processor job: " + name + " is missing");
        }
        return value;
    }

    private static String text(Map<String, Object> job, String name, String fallback) {
        Object value = field(job, name, fallback);
        if (!(value instanceof String)) {
            throw new IllegalArgumentException("processor job: " + name + " is not a string: " + value);
        }
        return (String) value;
    }

    private static long number(Map<String, Object> job, String name, Long fallback) {
        Object value = field(job, name, fallback);
        if (!(value instanceof Long)) {
            throw new IllegalArgumentException("processor job: " + name + " is not an integer: " + value);
        }
        return (Long) value;
    }

    private static Map<String, String> properties(Map<String, Object> job, String name) {
        Object value = job.get(name);
        if (value == null) {
            return Collections.emptyMap();
        }
        if (!(value instanceof Map)) {
            throw new IllegalArgumentException("processor job: " + name + " is not an object");
        }
        Map<String, String> out = new LinkedHashMap<>();
        for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
            out.put(String.valueOf(entry.getKey()), String.valueOf(entry.getValue()));
        }
        return out;
    }
}
