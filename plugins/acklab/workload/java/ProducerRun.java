package dev.acklab;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * One job from start to record, one of the runs of a {@link ProducerHost}: builds the producer, learns
 * the topic's partition count (unless the job gives it), initialises transactions, prints
 * {@code ready <partitions>} on its output, waits for {@code go} on its input, runs the send loop (in
 * transactions if the job says) until done or stopped ({@code stop <reason>} on its input, its input's
 * end, {@link #stopAll}, the job's duration, a fatal error), waits for the outstanding reports, then
 * writes into {@code out.prefix}: {@code .java.bin} (SendLog), {@code .java.stats} (Stats) and last
 * {@code .java.json} (the counts, error names and transaction outcomes).
 */
final class ProducerRun {
    static final long STOP_FLUSH_MS = 5000;
    private static final Set<ProducerRun> ACTIVE = ConcurrentHashMap.newKeySet();

    private final Job job;
    private final KafkaProducer<byte[], byte[]> producer;
    private final Stop stop = new Stop();
    private final Errors errors;
    private final SendLog log;
    private final SendLoop loop;
    private final Transactions transactions;
    private final Stats stats;
    private final CountDownLatch finished = new CountDownLatch(1);
    private volatile boolean going; // told to go: its record is to be waited for
    private final BufferedReader in;
    private final PrintStream out;
    private int partitions;
    private Integer fatalCode;
    private double fatalTs = Double.POSITIVE_INFINITY;
    private String fatalError;

    ProducerRun(Job job, BufferedReader in, PrintStream out) throws IOException {
        this.job = job;
        this.in = in;
        this.out = out;
        Map<String, Object> config = AcklabProducer.producerConfig(AcklabProducer.load(Paths.get(job.configFile)), job.bootstrapServers);
        if (job.transactional) {
            config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "acklab-" + job.topic + "-p" + job.producerIndex);
        }
        // unique in the host (its metrics and app-info registered once): the scenario's topic and the producer
        config.putIfAbsent(ProducerConfig.CLIENT_ID_CONFIG, "acklab-" + job.topic + "-p" + job.producerIndex);
        errors = new Errors(job.producerIndex);
        log = new SendLog(job.producerIndex, job.firstId, job.count);
        producer = new KafkaProducer<>(config);
        loop = new SendLoop(job, producer, log, errors, stop, new Progress(job.progressFile, job.producerIndex));
        transactions = new Transactions(job, producer, loop, stop);
        stats = new Stats(producer, loop, log, job.statsIntervalMs);
    }

    /** Stop every run that has not finished for {@code reason}, and wait for their records (bounded). */
    static void stopAll(String reason) {
        for (ProducerRun run : ACTIVE) {
            run.stop.request(reason);
        }
        for (ProducerRun run : ACTIVE) {
            if (!run.going) {
                continue; // waiting for go: its input's end releases it, and there is nothing to record
            }
            try {
                run.finished.await(run.job.flushTimeoutMs + 30_000, TimeUnit.MILLISECONDS);
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    void run() throws Exception {
        ACTIVE.add(this);
        try {
            runRegistered();
        } finally {
            finished.countDown();
            ACTIVE.remove(this);
        }
    }

    private void runRegistered() throws Exception {
        partitions = job.partitions.isEmpty() ? waitForTopic(60_000) : Integer.parseInt(job.partitions);
        if (job.transactional) {
            producer.initTransactions();
        }
        out.println("ready " + partitions);
        out.flush();
        String line = in.readLine();
        if (line == null || !line.trim().equals("go") || stop.requested) {
            producer.close(Duration.ZERO);
            return; // the worker gave up before the start: nothing was sent
        }
        going = true;
        Thread control = new Thread(() -> {
            try {
                String command;
                while ((command = in.readLine()) != null) {
                    if (command.startsWith("stop ")) {
                        stop.request(command.substring(5).trim());
                    }
                }
            } catch (IOException ignored) {
                // as the end of the input
            }
            stop.request(Stop.PARENT_GONE); // no effect once the run has ended
        }, "acklab-control");
        control.setDaemon(true);
        control.start();
        stats.start();
        double started = Clock.now(), ended;
        try {
            long t0 = System.nanoTime();
            long deadline = job.durationS > 0 ? t0 + (long) (job.durationS * 1e9) : Long.MAX_VALUE;
            if (job.transactional) {
                transactions.run(t0, deadline);
            } else {
                loop.produce(job.count, t0, deadline);
            }
        } catch (RuntimeException e) {
            fatal(e); // the producer is unusable: everything it did not acknowledge failed by this
        } finally {
            drain(Stop.SIGTERM.equals(stop.reason) || Stop.PARENT_GONE.equals(stop.reason) ? STOP_FLUSH_MS : job.flushTimeoutMs);
            ended = Clock.now();
            log.abandoned = true; // reports after this are not evidence: those records stay unreported (unknown)
            stats.stop();
            producer.close(Duration.ZERO);
            stats.sampleOnce();
            loop.publish();
        }
        int planned = Stop.DEADLINE.equals(stop.reason) ? loop.sent : job.count;
        write(planned, started, ended);
    }

    private int waitForTopic(long timeoutMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (true) {
            try {
                List<PartitionInfo> info = producer.partitionsFor(job.topic);
                if (info != null && !info.isEmpty()) {
                    return info.size();
                }
            } catch (RuntimeException e) {
                if (System.currentTimeMillis() >= deadline) {
                    throw e;
                }
            }
            if (System.currentTimeMillis() >= deadline) {
                throw new IllegalStateException("topic " + job.topic + " has no partitions after " + timeoutMs + " ms");
            }
            Thread.sleep(200);
        }
    }

    private void fatal(RuntimeException e) {
        synchronized (this) {
            if (fatalCode == null) {
                fatalCode = errors.code(e);
                fatalTs = Clock.now();
                fatalError = e.getClass().getSimpleName() + ": " + e.getMessage();
            }
        }
        stop.request("fatal error " + fatalError);
        System.err.println("p" + job.producerIndex + " stopped producing: " + stop.reason);
        e.printStackTrace();
    }

    /** Wait up to {@code budgetMs} for the reports of every sent message, publishing progress. */
    private void drain(long budgetMs) {
        long deadline = System.nanoTime() + budgetMs * 1_000_000L;
        while (log.reported.get() < loop.sent && System.nanoTime() < deadline) {
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
            loop.publish();
        }
        if (log.reported.get() < loop.sent) {
            System.err.println("p" + job.producerIndex + ": " + (loop.sent - log.reported.get()) + " messages unreported after " + budgetMs + " ms: recorded as unknown");
        }
    }

    private synchronized void write(int planned, double started, double ended) throws IOException {
        log.write(Paths.get(job.prefix + ".java.bin"));
        stats.write(Paths.get(job.prefix + ".java.stats"));
        String result = "{"
            + "\"planned\": " + planned
            + ", \"sent\": " + loop.sent
            + ", \"partitions\": " + partitions
            + ", \"started\": " + started
            + ", \"ended\": " + ended
            + ", \"stop_reason\": " + Json.quote(stop.reason)
            + ", \"fatal_error\": " + Json.quote(fatalError)
            + ", \"fatal_code\": " + fatalCode
            + ", \"fatal_ts\": " + (fatalCode == null ? "null" : Double.toString(fatalTs))
            + ", \"error_names\": " + errors.namesJson()
            + ", \"retriable_codes\": " + errors.retriableJson()
            + ", \"txn_starts\": " + transactions.starts
            + ", \"txn_outcomes\": " + transactions.outcomes
            + ", \"client_version\": " + Json.quote(AppInfoParser.getVersion())
            + "}";
        Path tmp = Paths.get(job.prefix + ".java.json.tmp");
        Files.write(tmp, result.getBytes(StandardCharsets.UTF_8));
        Files.move(tmp, Paths.get(job.prefix + ".java.json"), StandardCopyOption.ATOMIC_MOVE);
    }
}
