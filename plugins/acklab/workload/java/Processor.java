package dev.acklab;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.AppInfoParser;

import sun.misc.Signal;
import sun.misc.SignalHandler;

/**
 * One pipeline processor instance on the Java client ({@code AcklabProducer process JOB}), as
 * {@code acklab.workload.processing} states the contract: the styles, the point, the output value, the log.
 *
 * <p>The loop, per {@code poll()} batch (at most max_batch records) for eos: begin a transaction,
 * produce each transformed record, pass the point, send the batch's next offsets with the group
 * metadata read when the batch was polled (KIP-447: a consumer the group has moved on from is refused),
 * commit. Rebalance callbacks run inside {@code poll()} only, so never while a transaction is open.
 * An error whose cause KafkaProducer documents as fatal (fenced: {@link Errors#isFatal}), or an abort
 * that fails: the producer is closed and a new one with the same transactional.id fences its epoch;
 * any other error is abortable (including CommitFailedException, which KafkaProducer documents as
 * "abort the transaction"). Either way the consumer is rewound to its committed offsets. A timed-out
 * commit step is retried (KafkaProducer allows retrying it).
 *
 * <p>Signals (sun.misc.Signal): SIGUSR1 arms the point, SIGTERM asks for a stop after the current
 * batch, SIGINT is ignored. The point stops the process with {@code kill -STOP} (a JVM cannot raise
 * SIGSTOP itself), after its {@code point} line is written.
 */
final class Processor {
    static final int RETRIES = 3; // a timed-out commit step (each up to max.block.ms) is retried this often
    static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(10);
    /** The budget of the consumer's own offset commit and of its committed() (as acklab.workload.processor.STEP_S): a TimeoutException past it. */
    static final Duration COMMIT_TIMEOUT = Duration.ofSeconds(30);
    static final long PARENT_CHECK_NS = 500_000_000L;

    private final ProcessorJob job;
    private final ProcessorLog log;
    private final KafkaConsumer<byte[], byte[]> consumer;
    private KafkaProducer<byte[], byte[]> producer;
    private volatile boolean armed;
    private volatile String stopping;
    private volatile Exception sendError; // the batch's first failed send
    private int txn;
    private ConsumerGroupMetadata metadata; // the group metadata of the current batch
    private int generation = -1;

    Processor(ProcessorJob job) throws IOException {
        this.job = job;
        log = new ProcessorLog(job.log);
        Signal.handle(new Signal("USR1"), signal -> armed = true);
        Signal.handle(new Signal("TERM"), signal -> {
            if (stopping == null) {
                stopping = "SIGTERM";
            }
        });
        Signal.handle(new Signal("INT"), SignalHandler.SIG_IGN); // a Ctrl-C reaches the process group: the parent decides
        consumer = new KafkaConsumer<>(consumerConfig());
    }

    /** Run the job ({@code process JOB}): 0 when stopped as asked, 1 after an error it could not handle. */
    static int main(ProcessorJob job) throws IOException {
        try {
            new Processor(job).run();
            return 0;
        } catch (RuntimeException e) {
            e.printStackTrace();
            return 1;
        }
    }

    // ---- configuration --------------------------------------------------------------------------

    private Map<String, Object> consumerConfig() {
        Map<String, Object> config = new HashMap<>();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, job.bootstrapServers);
        config.put(ConsumerConfig.GROUP_ID_CONFIG, job.groupId);
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, "acklab-processor-" + job.instance + "." + job.incarnation);
        config.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(job.maxBatch));
        config.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, Long.toString(job.maxPollIntervalMs));
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        if (job.groupProtocol.equals("consumer")) {
            config.put("group.protocol", "consumer"); // KIP-848 (clients 3.7+): the session and heartbeat are the broker's settings
        } else {
            config.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, Long.toString(job.sessionTimeoutMs));
            config.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, Long.toString(job.heartbeatIntervalMs));
        }
        config.putAll(job.consumerConfig);
        return config;
    }

    private KafkaProducer<byte[], byte[]> newProducer() {
        Map<String, Object> config = new HashMap<>();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, job.bootstrapServers);
        config.put(ProducerConfig.CLIENT_ID_CONFIG, "acklab-processor-" + job.instance + "." + job.incarnation);
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        config.put(ProducerConfig.LINGER_MS_CONFIG, "5"); // as the confluent-kafka processor's
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        if (job.transactional()) {
            config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, job.transactionalId);
            config.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, Long.toString(job.transactionTimeoutMs));
        }
        config.putAll(job.producerConfig);
        KafkaProducer<byte[], byte[]> created = new KafkaProducer<>(config);
        if (job.transactional()) {
            try {
                created.initTransactions(); // fences the transactional.id's earlier epoch, ends its open transaction
            } catch (RuntimeException e) {
                created.close(Duration.ZERO);
                throw e;
            }
        }
        return created;
    }

    // ---- the loop -------------------------------------------------------------------------------

    private void run() {
        log.event("start", "instance", job.instance, "incarnation", job.incarnation, "pid", ProcessHandle.current().pid(),
            "client_family", "java", "client_version", AppInfoParser.getVersion(), "transactional_id", job.transactionalId);
        String reason = "error";
        try {
            producer = newProducer();
            consumer.subscribe(Collections.singletonList(job.inputTopic), new Listener());
            long nextParentCheck = 0;
            while (stopping == null) {
                if (job.parentPid != null && System.nanoTime() - nextParentCheck >= 0) {
                    nextParentCheck = System.nanoTime() + PARENT_CHECK_NS;
                    long parent = ProcessHandle.current().parent().map(ProcessHandle::pid).orElse(-1L);
                    if (parent != job.parentPid) {
                        stopping = "parent gone";
                        break;
                    }
                }
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(job.pollTimeoutMs));
                if (!records.isEmpty()) {
                    step(records);
                    txn++;
                }
            }
            reason = stopping;
        } finally {
            close(reason);
        }
    }

    private void step(ConsumerRecords<byte[], byte[]> records) {
        switch (job.style) {
            case "eos": eos(records); break;
            case "eos-naive": eosNaive(records); break;
            case "at-least-once": atLeastOnce(records); break;
            case "at-most-once": atMostOnce(records); break;
            case "bare": produce(records); break; // the benchmark's baseline (processing.BARE)
            default: throw new IllegalStateException(job.style);
        }
    }

    private void eos(ConsumerRecords<byte[], byte[]> records) {
        Map<TopicPartition, OffsetAndMetadata> next = batch(records);
        ConsumerGroupMetadata polledIn = metadata;
        try {
            producer.beginTransaction();
            produce(records);
            producer.flush(); // the output is in the log (uncommitted) before the point
            point();
            retrying(() -> producer.sendOffsetsToTransaction(next, polledIn));
            retrying(producer::commitTransaction);
            log.event("committed", "txn", txn, "offsets", offsets(next));
        } catch (KafkaException | IllegalStateException e) {
            recover(e);
        }
    }

    /** The planted bug: the transaction holds the output only, the offsets follow with the consumer's commit. */
    private void eosNaive(ConsumerRecords<byte[], byte[]> records) {
        Map<TopicPartition, OffsetAndMetadata> next = batch(records);
        try {
            producer.beginTransaction();
            produce(records);
            retrying(producer::commitTransaction);
            log.event("txn_committed", "txn", txn);
        } catch (KafkaException | IllegalStateException e) {
            recover(e);
            return;
        }
        point();
        commitOffsets(next);
    }

    private void atLeastOnce(ConsumerRecords<byte[], byte[]> records) {
        Map<TopicPartition, OffsetAndMetadata> next = batch(records);
        produce(records);
        producer.flush();
        if (sendError != null) { // the output is not all written: the batch is done again
            log.event("error", "txn", txn, "error", name(sendError), "fatal", false);
            rewind();
            return;
        }
        point();
        commitOffsets(next);
    }

    private void atMostOnce(ConsumerRecords<byte[], byte[]> records) {
        Map<TopicPartition, OffsetAndMetadata> next = batch(records);
        if (!commitOffsets(next)) {
            return;
        }
        point();
        produce(records);
        producer.flush();
        if (sendError != null) { // lost: at most once
            log.event("error", "txn", txn, "error", name(sendError), "fatal", false);
        }
    }

    /** The consumer's synchronous commit of {@code next} ({@code committed}); on an error, {@code error} and a rewind. */
    private boolean commitOffsets(Map<TopicPartition, OffsetAndMetadata> next) {
        try {
            consumer.commitSync(next, COMMIT_TIMEOUT);
        } catch (KafkaException e) {
            log.event("error", "txn", txn, "error", name(e), "fatal", false);
            rewind();
            return false;
        }
        log.event("committed", "txn", txn, "offsets", offsets(next));
        return true;
    }

    // ---- one batch ------------------------------------------------------------------------------

    /** Log the polled batch ({@code batch}, with the generation it is produced under); the next offset per partition. */
    private Map<TopicPartition, OffsetAndMetadata> batch(ConsumerRecords<byte[], byte[]> records) {
        metadata = consumer.groupMetadata();
        generation = metadata.generationId(); // the member epoch under group.protocol=consumer
        Map<String, Object> inputs = new LinkedHashMap<>();
        Map<TopicPartition, OffsetAndMetadata> next = new LinkedHashMap<>();
        for (TopicPartition tp : sorted(records.partitions())) {
            List<ConsumerRecord<byte[], byte[]>> list = records.records(tp);
            long first = list.get(0).offset(), last = list.get(list.size() - 1).offset();
            inputs.put(Integer.toString(tp.partition()), Arrays.asList(first, last));
            next.put(tp, new OffsetAndMetadata(last + 1));
        }
        log.event("batch", "txn", txn, "generation", generation, "count", records.count(), "inputs", inputs);
        return next;
    }

    /** Send the batch's transformed records (the first failure is kept in {@link #sendError}). */
    private void produce(ConsumerRecords<byte[], byte[]> records) {
        sendError = null;
        for (TopicPartition tp : sorted(records.partitions())) {
            for (ConsumerRecord<byte[], byte[]> record : records.records(tp)) {
                producer.send(new ProducerRecord<>(job.outputTopic, record.key(), output(record)), (metadata, exception) -> {
                    if (exception != null && sendError == null) {
                        sendError = exception;
                    }
                });
            }
        }
    }

    /** processing.output_value: the input's {@code <id>:<seq>:}, then instance:incarnation:generation:partition:offset:txn. */
    private byte[] output(ConsumerRecord<byte[], byte[]> record) {
        byte[] in = record.value();
        int prefix = prefixLength(in);
        byte[] tail = (job.instance + ":" + job.incarnation + ":" + generation + ":" + record.partition() + ":" + record.offset() + ":" + txn)
            .getBytes(StandardCharsets.US_ASCII);
        byte[] out = Arrays.copyOf(in, prefix + tail.length);
        System.arraycopy(tail, 0, out, prefix, tail.length);
        return out;
    }

    /** The length of {@code <id>:<seq>:} (processing.input_prefix). */
    static int prefixLength(byte[] value) {
        int colons = 0;
        for (int i = 0; value != null && i < value.length; i++) {
            if (value[i] == ':' && ++colons == 2) {
                return i + 1;
            }
        }
        throw new IllegalArgumentException("input value without an <id>:<seq>: prefix");
    }

    /** The point: if armed, log it and stop this process (until SIGCONT, or for good). */
    private void point() {
        if (!armed) {
            return;
        }
        armed = false;
        log.event("point", "txn", txn);
        try {
            long pid = ProcessHandle.current().pid();
            new ProcessBuilder("sh", "-c", "kill -STOP " + pid).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start().waitFor();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    // ---- errors ---------------------------------------------------------------------------------

    private interface Step {
        void run();
    }

    private static void retrying(Step step) {
        for (int attempt = 0; ; attempt++) {
            try {
                step.run();
                return;
            } catch (TimeoutException e) {
                if (attempt >= RETRIES) {
                    throw e;
                }
            }
        }
    }

    /** After a failed transaction step: abort (abortable) or a new producer (fatal), then rewind. */
    private void recover(RuntimeException e) {
        boolean fatal = isFatal(e);
        log.event("error", "txn", txn, "error", name(e), "fatal", fatal);
        if (!fatal) {
            try {
                retrying(producer::abortTransaction);
                log.event("aborted", "txn", txn, "error", name(e));
            } catch (KafkaException | IllegalStateException again) {
                log.event("error", "txn", txn, "error", name(again), "fatal", true);
                fatal = true;
            }
        }
        if (fatal) {
            try {
                producer.close(Duration.ZERO);
            } catch (RuntimeException ignored) {
                // a broken producer: it is replaced either way
            }
            producer = null;
            producer = newProducer(); // same transactional.id: fences the broken epoch, aborts its transaction
        }
        rewind();
    }

    /** An error KafkaProducer documents as fatal (fenced, ...), itself or as a cause. */
    static boolean isFatal(Throwable e) {
        for (Throwable cause = e; cause != null; cause = cause.getCause() == cause ? null : cause.getCause()) {
            if (cause instanceof RuntimeException && Errors.isFatal((RuntimeException) cause)) {
                return true;
            }
        }
        return false;
    }

    static String name(Throwable e) {
        String text = e.getClass().getSimpleName() + ": " + e.getMessage();
        Throwable cause = e.getCause();
        return cause == null || cause == e ? text : text + " (cause " + cause.getClass().getSimpleName() + ": " + cause.getMessage() + ")";
    }

    /** Set the consumer back to its committed offsets (its assignment's; the beginning where none). */
    private void rewind() {
        Set<TopicPartition> assignment = consumer.assignment();
        if (assignment.isEmpty()) {
            return;
        }
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assignment, COMMIT_TIMEOUT);
        Map<String, Object> offsets = new LinkedHashMap<>();
        for (TopicPartition tp : sorted(assignment)) {
            OffsetAndMetadata at = committed.get(tp);
            if (at != null) {
                consumer.seek(tp, at.offset());
            } else {
                consumer.seekToBeginning(Collections.singleton(tp));
            }
            offsets.put(Integer.toString(tp.partition()), at != null ? at.offset() : consumer.position(tp));
        }
        log.event("rewound", "offsets", offsets);
    }

    // ---- rebalances and the end ------------------------------------------------------------------

    private final class Listener implements ConsumerRebalanceListener {
        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            rebalanced("revoked", partitions);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            rebalanced("assigned", partitions);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            rebalanced("revoked", partitions);
        }
    }

    private void rebalanced(String ev, Collection<TopicPartition> partitions) {
        int gen = -1;
        String member = null;
        try {
            ConsumerGroupMetadata now = consumer.groupMetadata();
            gen = now.generationId();
            member = now.memberId();
        } catch (RuntimeException ignored) {
            // not in a group (closing): unknown
        }
        List<Integer> numbers = new ArrayList<>();
        for (TopicPartition tp : sorted(partitions)) {
            numbers.add(tp.partition());
        }
        log.event(ev, "generation", gen, "member", member, "partitions", numbers);
    }

    private void close(String reason) {
        try {
            consumer.close(); // leaves the group
        } catch (RuntimeException e) {
            e.printStackTrace();
        }
        try {
            if (producer != null) {
                producer.close(CLOSE_TIMEOUT);
            }
        } catch (RuntimeException e) {
            e.printStackTrace();
        }
        log.event("stop", "reason", reason);
    }

    private static Map<String, Object> offsets(Map<TopicPartition, OffsetAndMetadata> next) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> entry : next.entrySet()) {
            out.put(Integer.toString(entry.getKey().partition()), entry.getValue().offset());
        }
        return out;
    }

    private static List<TopicPartition> sorted(Collection<TopicPartition> partitions) {
        List<TopicPartition> out = new ArrayList<>(partitions);
        out.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
        return out;
    }
}
