package dev.acklab;

import java.util.Properties;

/** One producer's job, the properties file {@code acklab.workload.java_worker} writes, parsed once. */
final class Job {
    final int producerIndex, producers, count, keys, messageBytes;
    final int width; // digits of the largest id, the width of both numbers in a value
    final long firstId;
    final double rate; // messages per second, 0 = as fast as possible
    final int chunk; // messages sent between two waits for the rate (the worker's pacing_chunk)
    final double durationS; // 0 = none
    final long flushTimeoutMs, statsIntervalMs;
    final String topic, prefix, bootstrapServers, configFile, progressFile;
    final String[] keyTopics; // the topic each key is sent to (the worker's WorkerJob.key_topics)
    final String partitions; // empty: learnt from the topic's metadata
    final boolean transactional;
    final int recordsPerTxn;
    final double abortRatio;

    Job(Properties job) {
        producerIndex = Integer.parseInt(job.getProperty("producer"));
        producers = Integer.parseInt(job.getProperty("producers"));
        firstId = Long.parseLong(job.getProperty("first.id"));
        count = Integer.parseInt(job.getProperty("count"));
        keys = Integer.parseInt(job.getProperty("keys"));
        messageBytes = Integer.parseInt(job.getProperty("message.bytes"));
        width = Long.toString(Long.parseLong(job.getProperty("max.id"))).length();
        rate = Double.parseDouble(job.getProperty("rate", "0"));
        chunk = Integer.parseInt(job.getProperty("chunk", "1"));
        durationS = Double.parseDouble(job.getProperty("duration.s", "0"));
        flushTimeoutMs = (long) (Double.parseDouble(job.getProperty("flush.timeout.s")) * 1000);
        topic = job.getProperty("topic");
        String listed = job.getProperty("key.topics", "");
        if (listed.isEmpty()) {
            keyTopics = new String[keys];
            java.util.Arrays.fill(keyTopics, topic);
        } else {
            keyTopics = listed.split(",");
            if (keyTopics.length != keys) {
                throw new IllegalArgumentException("key.topics names " + keyTopics.length + " topics for " + keys + " keys");
            }
        }
        prefix = job.getProperty("out.prefix");
        bootstrapServers = job.getProperty("bootstrap.servers");
        configFile = job.getProperty("config.file");
        progressFile = job.getProperty("progress.file");
        partitions = job.getProperty("partitions", "");
        transactional = Boolean.parseBoolean(job.getProperty("transactional", "false"));
        recordsPerTxn = Integer.parseInt(job.getProperty("records.per.txn", "1000"));
        abortRatio = Double.parseDouble(job.getProperty("abort.ratio", "0"));
        statsIntervalMs = Long.parseLong(job.getProperty("stats.interval.ms", "1000"));
    }
}
