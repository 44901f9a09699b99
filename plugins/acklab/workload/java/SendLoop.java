package dev.acklab;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;

/**
 * The send loop: sends local indices {@code sent .. end - 1} in order at the job's rate (value
 * {@code <id>:<seq>:} padded with {@code x}, key {@code p<n>-k<i % keys>}, to that key's topic), each delivery report into
 * the SendLog, and every TICK_MS publishes progress and checks the job's duration. Per record it
 * allocates only what send() needs (the value, the record, its callback).
 */
final class SendLoop {
    static final long TICK_MS = 250;

    private final Job job;
    private final KafkaProducer<byte[], byte[]> producer;
    private final SendLog log;
    private final Errors errors;
    private final Stop stop;
    private final Progress progress;
    private final byte[][] keyBytes;
    private final Thread sender = Thread.currentThread();
    /** Messages handed to send() so far (written by the sending thread only). */
    int sent;

    SendLoop(Job job, KafkaProducer<byte[], byte[]> producer, SendLog log, Errors errors, Stop stop, Progress progress) {
        this.job = job;
        this.producer = producer;
        this.log = log;
        this.errors = errors;
        this.stop = stop;
        this.progress = progress;
        keyBytes = new byte[job.keys][];
        for (int k = 0; k < job.keys; k++) {
            keyBytes[k] = ("p" + job.producerIndex + "-k" + k).getBytes(StandardCharsets.UTF_8);
        }
    }

    /** Send up to local index {@code end} (exclusive), paced from {@code t0} (System.nanoTime), until a stop. */
    void produce(int end, long t0, long deadline) {
        final int keys = job.keys, width = job.width, chunk = job.chunk;
        final double rate = job.rate;
        final long firstId = job.firstId;
        final double[] sendTs = log.sendTs;
        long nextTick = System.nanoTime() + TICK_MS * 1_000_000L;
        byte[] template = template();
        while (sent < end && !stop.requested) {
            int index = sent;
            byte[] value = template.clone();
            writeDigits(value, 0, firstId + index, width);
            writeDigits(value, width + 1, index / keys, width);
            sendTs[index] = Clock.now();
            sent = index + 1;
            int k = index % keys;
            producer.send(new ProducerRecord<>(job.keyTopics[k], keyBytes[k], value), (metadata, exception) -> {
                report(index, metadata, exception, Thread.currentThread() == sender);
            });
            long nowNanos = System.nanoTime();
            if (rate > 0 && (sent % chunk == 0 || sent == end)) {
                long due = t0 + (long) (sent / rate * 1e9);
                while (due - nowNanos > 0 && !stop.requested) {
                    LockSupport.parkNanos(Math.min(due - nowNanos, TICK_MS * 1_000_000L));
                    nowNanos = System.nanoTime();
                    if (nowNanos >= nextTick) {
                        nextTick = nowNanos + TICK_MS * 1_000_000L;
                        tick(deadline);
                    }
                }
            }
            if (nowNanos >= nextTick) {
                nextTick = nowNanos + TICK_MS * 1_000_000L;
                tick(deadline);
            }
        }
    }

    /**
     * A delivery report; {@code inSend}: send() itself reported it. send() reports a retriable error
     * itself after waiting max.block.ms (metadata, buffer memory): the documented delivery failure of
     * a record that never got a leader, like librdkafka's message timeout. Only a non-retriable one is
     * a refusal.
     */
    private void report(int index, RecordMetadata metadata, Exception exception, boolean inSend) {
        if (log.abandoned) {
            return;
        }
        int partitionOf = metadata == null ? -1 : metadata.partition();
        long offsetOf = metadata == null ? -1 : metadata.offset();
        if (exception == null) {
            log.report(index, partitionOf, offsetOf, SendLog.NO_ERROR, false);
        } else {
            log.report(index, partitionOf, offsetOf, errors.code(exception), inSend && !Errors.isRetriable(exception));
        }
    }

    void publish() {
        progress.publish(sent, log.acked.get(), log.failed.get());
    }

    private void tick(long deadline) {
        publish();
        if (System.nanoTime() >= deadline) {
            stop.request(Stop.DEADLINE);
        }
    }

    private byte[] template() {
        int width = job.width;
        byte[] value = new byte[job.messageBytes];
        Arrays.fill(value, (byte) 'x');
        for (int i = 0; i < width; i++) {
            value[i] = '0';
            value[width + 1 + i] = '0';
        }
        value[width] = ':';
        value[2 * width + 1] = ':';
        return value;
    }

    private static void writeDigits(byte[] value, int at, long number, int width) {
        for (int i = at + width - 1; i >= at; i--) {
            value[i] = (byte) ('0' + number % 10);
            number /= 10;
        }
    }
}
