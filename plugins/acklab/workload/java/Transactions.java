package dev.acklab;

import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.TimeoutException;

/**
 * A transactional load: transactions of the job's records.per.txn messages, every one the abort
 * ratio picks aborted (after a flush, so its records are in the log), an abortable error aborting the
 * open one. Records each transaction's first local index and its outcome (index in OUTCOMES).
 */
final class Transactions {
    static final String[] OUTCOMES = {"committed", "aborted", "unknown"}; // as acklab.workload.sendlog.TXN_OUTCOMES
    static final int COMMITTED = 0, ABORTED = 1, UNKNOWN = 2;

    private final Job job;
    private final KafkaProducer<byte[], byte[]> producer;
    private final SendLoop loop;
    private final Stop stop;
    final List<Integer> starts = new ArrayList<>();
    final List<Integer> outcomes = new ArrayList<>();

    Transactions(Job job, KafkaProducer<byte[], byte[]> producer, SendLoop loop, Stop stop) {
        this.job = job;
        this.producer = producer;
        this.loop = loop;
        this.stop = stop;
    }

    /** The whole load in transactions; a fatal error ends the open one as unknown and is thrown. */
    void run(long t0, long deadline) {
        int txn = 0;
        while (loop.sent < job.count && !stop.requested) {
            producer.beginTransaction();
            starts.add(loop.sent);
            boolean commit;
            try {
                loop.produce(Math.min(job.count, loop.sent + job.recordsPerTxn), t0, deadline);
                commit = !aborts(txn) && !stop.requested;
                if (!commit) {
                    producer.flush(); // deliver first, so the aborted records are in the log
                }
            } catch (KafkaException e) {
                if (Errors.isFatal(e) || e.getCause() instanceof RuntimeException && Errors.isFatal((RuntimeException) e.getCause())) {
                    outcomes.add(UNKNOWN);
                    throw e;
                }
                commit = false; // abortable: the transaction is aborted, the next one starts at the next id
            }
            end(commit);
            txn++;
        }
    }

    /** Transaction {@code txn} is aborted: the abort ratio spread evenly (0.25: every fourth). */
    private boolean aborts(int txn) {
        return Math.floor((txn + 1) * job.abortRatio) > Math.floor(txn * job.abortRatio);
    }

    private void end(boolean commit) {
        long deadline = System.nanoTime() + job.flushTimeoutMs * 1_000_000L;
        while (true) {
            try {
                if (commit) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
                outcomes.add(commit ? COMMITTED : ABORTED);
                return;
            } catch (TimeoutException e) {
                if (System.nanoTime() < deadline) {
                    continue; // a timed-out commit or abort may be retried
                }
                outcomes.add(UNKNOWN);
                throw e;
            } catch (KafkaException e) {
                if (commit && !Errors.isFatal(e)) {
                    commit = false;
                    continue;
                }
                outcomes.add(UNKNOWN);
                throw e;
            }
        }
    }
}
