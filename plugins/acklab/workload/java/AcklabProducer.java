package dev.acklab;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.RandomAccessFile;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * acklab's Java producer driver: one producer process of a load, on the Java client (kafka-clients).
 *
 * <p>{@code validate FILE...}: for each producer properties file, one JSON line on stdout:
 * {@code {"property": P|null, "error": MESSAGE|null, "idempotence": true|false|null}}, the client's own
 * verdict (an unknown property, an invalid value, a conflict its ProducerConfig or KafkaProducer
 * constructor rejects) and, where the client says, whether it enables idempotence.
 *
 * <p>{@code read FILE}: the properties of a file as java.util.Properties reads it, one JSON object.
 *
 * <p>{@code run JOB}: the job is a properties file written by {@code acklab.workload.java_worker}.
 * The driver builds its producer, learns the topic's partition count (unless the job gives it),
 * initialises transactions, prints {@code ready <partitions>}, waits for {@code go} on stdin, then
 * sends ids {@code first.id .. first.id + count - 1} at the job's rate (value {@code <id>:<seq>:}
 * padded with {@code x}, key {@code p<n>-k<i % keys>}). A line {@code stop <reason>} on stdin, SIGTERM
 * (reason "stopped by SIGTERM") or the job's duration ends the load early. At the end it writes,
 * into {@code out.prefix}: {@code .java.bin} (the per-message arrays, little-endian: send_ts f64,
 * ack_ts f64, partition i32, offset i64, error i32, refused u8, each {@code count} long),
 * {@code .java.stats} (one CSV line per statistics sample) and last {@code .java.json} (the counts,
 * error names and transaction outcomes). Errors are named by their Java exception class.
 */
public final class AcklabProducer {
    static final int NO_ERROR = 0;
    static final int UNREPORTED = Integer.MIN_VALUE;
    static final long TICK_MS = 250;
    static final long STOP_FLUSH_MS = 5000;
    static final String DEADLINE = "duration_s reached";
    static final String SIGTERM_STOP = "stopped by SIGTERM";
    static final String[] TXN_OUTCOMES = {"committed", "aborted", "unknown"};

    public static void main(String[] args) throws Exception {
        if (args.length >= 1 && args[0].equals("validate")) {
            for (int i = 1; i < args.length; i++) {
                System.out.println(validate(load(Paths.get(args[i]))));
            }
        } else if (args.length == 2 && args[0].equals("run")) {
            new AcklabProducer(load(Paths.get(args[1]))).run();
        } else if (args.length == 2 && args[0].equals("read")) {
            Properties properties = load(Paths.get(args[1]));
            StringBuilder out = new StringBuilder("{");
            for (String name : new java.util.TreeSet<>(properties.stringPropertyNames())) {
                out.append(out.length() > 1 ? ", " : "").append(json(name)).append(": ").append(json(properties.getProperty(name)));
            }
            System.out.println(out.append("}"));
        } else if (args.length == 1 && args[0].equals("version")) {
            System.out.println(AppInfoParser.getVersion());
        } else {
            System.err.println("usage: AcklabProducer validate FILE... | read FILE | run JOB | version");
            System.exit(2);
        }
    }

    static Properties load(Path path) throws IOException {
        Properties properties = new Properties();
        try (var reader = Files.newBufferedReader(path, StandardCharsets.UTF_8)) {
            properties.load(reader);
        }
        return properties;
    }

    static Map<String, Object> producerConfig(Properties properties, String bootstrap) {
        Map<String, Object> config = new HashMap<>();
        for (String name : properties.stringPropertyNames()) {
            config.put(name, properties.getProperty(name));
        }
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return config;
    }

    // ---- validate ------------------------------------------------------------------------------

    static final Pattern CONFIG_NAME = Pattern.compile("(?:for configuration|configuration) ['`]?([a-z0-9._-]+)");

    static String validate(Properties properties) {
        for (String name : properties.stringPropertyNames()) {
            if (!ProducerConfig.configNames().contains(name)) {
                return "{\"property\": " + json(name) + ", \"error\": " + json("unknown producer property " + name) + ", \"idempotence\": null}";
            }
        }
        // Port 9 (discard) on loopback: the producer is built and closed without ever reaching a broker.
        Map<String, Object> config = producerConfig(properties, "127.0.0.1:9");
        Object idempotence = null;
        try {
            ProducerConfig parsed = new ProducerConfig(config);
            idempotence = idempotenceEnabled(parsed);
            new KafkaProducer<byte[], byte[]>(config).close(Duration.ZERO);
        } catch (Exception e) {
            Throwable cause = e;
            while (cause.getCause() != null && cause.getMessage() != null && cause.getMessage().startsWith("Failed to construct kafka producer")) {
                cause = cause.getCause();
            }
            String message = cause.getMessage() == null ? cause.getClass().getSimpleName() : cause.getMessage();
            Matcher matcher = CONFIG_NAME.matcher(message);
            String property = matcher.find() ? matcher.group(1) : null;
            return "{\"property\": " + json(property) + ", \"error\": " + json(message) + ", \"idempotence\": null}";
        }
        return "{\"property\": null, \"error\": null, \"idempotence\": " + idempotence + "}";
    }

    /** The client's own answer to "is idempotence enabled": ProducerConfig.idempotenceEnabled where it exists, else the parsed value. */
    static Object idempotenceEnabled(ProducerConfig parsed) {
        try {
            Method method = ProducerConfig.class.getDeclaredMethod("idempotenceEnabled");
            method.setAccessible(true);
            return method.invoke(parsed);
        } catch (ReflectiveOperationException | RuntimeException e) {
            // From 3.2 the parsed value itself is adjusted (KAFKA-13673)
            return parsed.getBoolean(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG);
        }
    }

    // ---- run -----------------------------------------------------------------------------------

    final Properties job;
    final int producerIndex, producers, count, keys, messageBytes, width;
    final long firstId;
    final double rate; // messages per second, 0 = as fast as possible
    final int chunk; // messages sent between two waits for the rate (the worker's pacing_chunk)
    final double durationS; // 0 = none
    final long flushTimeoutMs;
    final String topic, prefix;
    final boolean transactional;
    final int recordsPerTxn;
    final double abortRatio;
    final KafkaProducer<byte[], byte[]> producer;
    final Thread mainThread = Thread.currentThread();

    final double[] sendTs, ackTs;
    final int[] partition, error;
    final long[] offset;
    final boolean[] refused;
    final byte[][] keyBytes;
    final List<Integer> txnStarts = new ArrayList<>();
    final List<Integer> txnOutcomes = new ArrayList<>();
    final Map<String, Integer> errorCodes = new LinkedHashMap<>();
    final List<Boolean> errorRetriable = new ArrayList<>();
    final AtomicLong acked = new AtomicLong(), failed = new AtomicLong(), reported = new AtomicLong();
    final List<String> statsLines = new ArrayList<>();
    final CountDownLatch finished = new CountDownLatch(1);
    final long epochNanos0 = System.currentTimeMillis() * 1_000_000L, nanos0 = System.nanoTime();

    volatile boolean stopping, abandoned;
    volatile String stopReason;
    int sent;
    int partitions;
    Integer fatalCode;
    double fatalTs = Double.POSITIVE_INFINITY;
    String fatalError;
    MappedByteBuffer progress;
    long statsIntervalMs;

    AcklabProducer(Properties job) throws IOException {
        this.job = job;
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
        prefix = job.getProperty("out.prefix");
        transactional = Boolean.parseBoolean(job.getProperty("transactional", "false"));
        recordsPerTxn = Integer.parseInt(job.getProperty("records.per.txn", "1000"));
        abortRatio = Double.parseDouble(job.getProperty("abort.ratio", "0"));
        statsIntervalMs = Long.parseLong(job.getProperty("stats.interval.ms", "1000"));
        sendTs = new double[count];
        ackTs = new double[count];
        Arrays.fill(sendTs, Double.NaN);
        Arrays.fill(ackTs, Double.NaN);
        partition = new int[count];
        Arrays.fill(partition, -1);
        offset = new long[count];
        Arrays.fill(offset, -1L);
        error = new int[count];
        Arrays.fill(error, UNREPORTED);
        refused = new boolean[count];
        keyBytes = new byte[keys][];
        for (int k = 0; k < keys; k++) {
            keyBytes[k] = ("p" + producerIndex + "-k" + k).getBytes(StandardCharsets.UTF_8);
        }
        Map<String, Object> config = producerConfig(load(Paths.get(job.getProperty("config.file"))), job.getProperty("bootstrap.servers"));
        if (transactional) {
            config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "acklab-" + topic + "-p" + producerIndex);
        }
        config.putIfAbsent(ProducerConfig.CLIENT_ID_CONFIG, "acklab-p" + producerIndex);
        producer = new KafkaProducer<>(config);
        try (RandomAccessFile file = new RandomAccessFile(job.getProperty("progress.file"), "rw")) {
            progress = file.getChannel().map(FileChannel.MapMode.READ_WRITE, 24L * producerIndex, 24);
            progress.order(ByteOrder.LITTLE_ENDIAN);
        }
    }

    double now() {
        return (epochNanos0 + (System.nanoTime() - nanos0)) / 1e9;
    }

    void stop(String reason) {
        if (stopReason == null) {
            stopReason = reason;
        }
        stopping = true;
    }

    void run() throws Exception {
        String given = job.getProperty("partitions", "");
        partitions = given.isEmpty() ? waitForTopic(60_000) : Integer.parseInt(given);
        if (transactional) {
            producer.initTransactions();
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stop(SIGTERM_STOP); // e.g. the parent died (PR_SET_PDEATHSIG): the evidence is still written
            try {
                finished.await(flushTimeoutMs + 30_000, TimeUnit.MILLISECONDS);
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }));
        PrintStream out = System.out;
        out.println("ready " + partitions);
        out.flush();
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line = stdin.readLine();
        if (line == null || !line.trim().equals("go")) {
            producer.close(Duration.ZERO);
            finished.countDown();
            return; // the parent gave up before the start: nothing was sent
        }
        Thread control = new Thread(() -> {
            try {
                String command;
                while ((command = stdin.readLine()) != null) {
                    if (command.startsWith("stop ")) {
                        stop(command.substring(5).trim());
                    }
                }
            } catch (IOException ignored) {
                // the parent closed our stdin
            }
        }, "acklab-control");
        control.setDaemon(true);
        control.start();
        Thread sampler = new Thread(this::sampleStats, "acklab-stats");
        sampler.setDaemon(true);
        sampler.start();
        double started = now(), ended;
        try {
            long t0 = System.nanoTime();
            long deadline = durationS > 0 ? t0 + (long) (durationS * 1e9) : Long.MAX_VALUE;
            if (transactional) {
                transactions(t0, deadline);
            } else {
                produce(count, t0, deadline);
            }
        } catch (RuntimeException e) {
            fatal(e); // the producer is unusable: everything it did not acknowledge failed by this
        } finally {
            drain(stopReason != null && stopReason.equals(SIGTERM_STOP) ? STOP_FLUSH_MS : flushTimeoutMs);
            ended = now();
            abandoned = true; // reports after this are not evidence: those records stay unreported (unknown)
            producer.close(Duration.ZERO);
            sampleOnce();
            publish();
        }
        int planned = DEADLINE.equals(stopReason) ? sent : count;
        write(planned, started, ended);
        finished.countDown();
    }

    int waitForTopic(long timeoutMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (true) {
            try {
                List<PartitionInfo> info = producer.partitionsFor(topic);
                if (info != null && !info.isEmpty()) {
                    return info.size();
                }
            } catch (RuntimeException e) {
                if (System.currentTimeMillis() >= deadline) {
                    throw e;
                }
            }
            if (System.currentTimeMillis() >= deadline) {
                throw new IllegalStateException("topic " + topic + " has no partitions after " + timeoutMs + " ms");
            }
            Thread.sleep(200);
        }
    }

    void produce(int end, long t0, long deadline) {
        long nextTick = System.nanoTime() + TICK_MS * 1_000_000L;
        byte[] template = template();
        while (sent < end && !stopping) {
            int index = sent;
            byte[] value = template.clone();
            writeDigits(value, 0, firstId + index);
            writeDigits(value, width + 1, index / keys);
            sendTs[index] = now();
            sent = index + 1;
            producer.send(new ProducerRecord<>(topic, keyBytes[index % keys], value), (metadata, exception) -> {
                boolean inSend = Thread.currentThread() == mainThread;
                report(index, metadata == null ? -1 : metadata.partition(), metadata == null ? -1 : metadata.offset(), exception, inSend);
            });
            long nowNanos = System.nanoTime();
            if (rate > 0 && (sent % chunk == 0 || sent == end)) {
                long due = t0 + (long) (sent / rate * 1e9);
                while (due - nowNanos > 0 && !stopping) {
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

    void tick(long deadline) {
        publish();
        if (System.nanoTime() >= deadline) {
            stop(DEADLINE);
        }
    }

    void transactions(long t0, long deadline) {
        int txn = 0;
        while (sent < count && !stopping) {
            producer.beginTransaction();
            txnStarts.add(sent);
            boolean commit;
            try {
                produce(Math.min(count, sent + recordsPerTxn), t0, deadline);
                commit = !aborts(txn) && !stopping;
                if (!commit) {
                    producer.flush(); // deliver first, so the aborted records are in the log
                }
            } catch (org.apache.kafka.common.KafkaException e) {
                if (isFatal(e) || e.getCause() instanceof RuntimeException && isFatal((RuntimeException) e.getCause())) {
                    txnOutcomes.add(2);
                    throw e;
                }
                commit = false; // abortable: the transaction is aborted, the next one starts at the next id
            }
            endTransaction(commit);
            txn++;
        }
    }

    boolean aborts(int txn) {
        return Math.floor((txn + 1) * abortRatio) > Math.floor(txn * abortRatio);
    }

    /** The errors after which KafkaProducer's documentation says the producer can only be closed. */
    static boolean isFatal(RuntimeException e) {
        return e instanceof ProducerFencedException || e instanceof OutOfOrderSequenceException
            || e instanceof AuthorizationException || e instanceof UnsupportedVersionException
            || e instanceof FencedInstanceIdException;
    }

    void endTransaction(boolean commit) {
        long deadline = System.nanoTime() + flushTimeoutMs * 1_000_000L;
        while (true) {
            try {
                if (commit) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
                txnOutcomes.add(commit ? 0 : 1);
                return;
            } catch (org.apache.kafka.common.errors.TimeoutException e) {
                if (System.nanoTime() < deadline) {
                    continue; // a timed-out commit or abort may be retried
                }
                txnOutcomes.add(2);
                throw e;
            } catch (org.apache.kafka.common.KafkaException e) {
                if (commit && !isFatal(e)) {
                    commit = false;
                    continue;
                }
                txnOutcomes.add(2);
                throw e;
            }
        }
    }

    byte[] template() {
        byte[] value = new byte[messageBytes];
        Arrays.fill(value, (byte) 'x');
        for (int i = 0; i < width; i++) {
            value[i] = '0';
            value[width + 1 + i] = '0';
        }
        value[width] = ':';
        value[2 * width + 1] = ':';
        return value;
    }

    void writeDigits(byte[] value, int at, long number) {
        for (int i = at + width - 1; i >= at; i--) {
            value[i] = (byte) ('0' + number % 10);
            number /= 10;
        }
    }

    synchronized int code(Throwable exception) {
        String name = exception.getClass().getSimpleName();
        Integer code = errorCodes.get(name);
        if (code == null) {
            code = errorCodes.size() + 1;
            errorCodes.put(name, code);
            errorRetriable.add(exception instanceof RetriableException);
            // The producer log keeps each error's first message, as users quote it (field notes)
            System.err.println("p" + producerIndex + " first " + name + ": " + exception.getMessage());
        }
        return code;
    }

    void report(int index, int partitionOf, long offsetOf, Exception exception, boolean inSend) {
        if (abandoned) {
            return;
        }
        synchronized (this) {
            if (error[index] != UNREPORTED) {
                throw new IllegalStateException("p" + producerIndex + ": more than one delivery report for id " + (firstId + index));
            }
            ackTs[index] = now();
            if (partitionOf >= 0) {
                partition[index] = partitionOf;
            }
            if (exception == null) {
                error[index] = NO_ERROR;
                offset[index] = offsetOf;
                acked.incrementAndGet();
            } else {
                error[index] = code(exception);
                // send() reports a retriable error itself after waiting max.block.ms (metadata, buffer
                // memory): the documented delivery failure of a record that never got a leader, like
                // librdkafka's message timeout. Only a non-retriable one is a refusal.
                refused[index] = inSend && !(exception instanceof RetriableException);
                failed.incrementAndGet();
            }
            reported.incrementAndGet();
        }
    }

    void fatal(RuntimeException e) {
        synchronized (this) {
            if (fatalCode == null) {
                fatalCode = code(e);
                fatalTs = now();
                fatalError = e.getClass().getSimpleName() + ": " + e.getMessage();
            }
        }
        stop("fatal error " + fatalError);
        System.err.println("p" + producerIndex + " stopped producing: " + stopReason);
        e.printStackTrace();
    }

    void drain(long budgetMs) {
        long deadline = System.nanoTime() + budgetMs * 1_000_000L;
        while (reported.get() < sent && System.nanoTime() < deadline) {
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
            publish();
        }
        if (reported.get() < sent) {
            System.err.println("p" + producerIndex + ": " + (sent - reported.get()) + " messages unreported after " + budgetMs + " ms: recorded as unknown");
        }
    }

    void publish() {
        progress.putLong(0, sent);
        progress.putLong(8, acked.get());
        progress.putLong(16, failed.get());
    }

    // ---- statistics ----------------------------------------------------------------------------

    void sampleStats() {
        while (!abandoned) {
            try {
                Thread.sleep(statsIntervalMs);
            } catch (InterruptedException e) {
                return;
            }
            if (!abandoned) {
                sampleOnce();
            }
        }
    }

    /** One CSV line: ts, txmsgs, txretries, txerrs, req_timeouts, disconnects, msg_cnt, outbuf_cnt,
     * outbuf_msg_cnt, waitresp_cnt, waitresp_msg_cnt, request_latency_avg_ms, request_latency_max_ms
     * (empty where the Java client has no such metric). */
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
        statsLines.add(String.join(",",
            Double.toString(now()),
            metric(values, "record-send-total"),
            metric(values, "record-retry-total"),
            metric(values, "record-error-total"),
            "",
            metric(values, "connection-close-total"),
            Long.toString(sent - reported.get()),
            "",
            "",
            metric(values, "requests-in-flight"),
            "",
            metric(values, "request-latency-avg"),
            metric(values, "request-latency-max")));
    }

    static String metric(Map<String, Double> values, String name) {
        Double value = values.get(name);
        return value == null || value.isNaN() || value.isInfinite() ? "" : Long.toString(Math.round(value));
    }

    // ---- evidence ------------------------------------------------------------------------------

    synchronized void write(int planned, double started, double ended) throws IOException {
        Path bin = Paths.get(prefix + ".java.bin");
        try (FileChannel channel = FileChannel.open(bin, StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
            ByteBuffer buffer = ByteBuffer.allocate(1 << 20).order(ByteOrder.LITTLE_ENDIAN);
            for (int column = 0; column < 6; column++) {
                for (int i = 0; i < count; i++) {
                    if (buffer.remaining() < 8) {
                        buffer.flip();
                        channel.write(buffer);
                        buffer.clear();
                    }
                    switch (column) {
                        case 0: buffer.putDouble(sendTs[i]); break;
                        case 1: buffer.putDouble(ackTs[i]); break;
                        case 2: buffer.putInt(partition[i]); break;
                        case 3: buffer.putLong(offset[i]); break;
                        case 4: buffer.putInt(error[i]); break;
                        default: buffer.put((byte) (refused[i] ? 1 : 0)); break;
                    }
                }
            }
            buffer.flip();
            channel.write(buffer);
        }
        Files.write(Paths.get(prefix + ".java.stats"), statsLines, StandardCharsets.UTF_8);
        StringBuilder names = new StringBuilder("{");
        StringBuilder retriable = new StringBuilder("[");
        int n = 0;
        for (Map.Entry<String, Integer> entry : errorCodes.entrySet()) {
            names.append(n == 0 ? "" : ", ").append(json(Integer.toString(entry.getValue()))).append(": ").append(json(entry.getKey()));
            if (errorRetriable.get(n)) {
                retriable.append(retriable.length() > 1 ? ", " : "").append(entry.getValue());
            }
            n++;
        }
        String result = "{"
            + "\"planned\": " + planned
            + ", \"sent\": " + sent
            + ", \"partitions\": " + partitions
            + ", \"started\": " + started
            + ", \"ended\": " + ended
            + ", \"stop_reason\": " + json(stopReason)
            + ", \"fatal_error\": " + json(fatalError)
            + ", \"fatal_code\": " + fatalCode
            + ", \"fatal_ts\": " + (fatalCode == null ? "null" : Double.toString(fatalTs))
            + ", \"error_names\": " + names.append("}")
            + ", \"retriable_codes\": " + retriable.append("]")
            + ", \"txn_starts\": " + txnStarts
            + ", \"txn_outcomes\": " + txnOutcomes
            + ", \"client_version\": " + json(AppInfoParser.getVersion())
            + "}";
        Path tmp = Paths.get(prefix + ".java.json.tmp");
        Files.write(tmp, result.getBytes(StandardCharsets.UTF_8));
        Files.move(tmp, Paths.get(prefix + ".java.json"), StandardCopyOption.ATOMIC_MOVE);
    }

    static String json(String text) {
        if (text == null) {
            return "null";
        }
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            switch (c) {
                case '"': out.append("\\\""); break;
                case '\\': out.append("\\\\"); break;
                default:
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        return out.append('"').toString();
    }
}
