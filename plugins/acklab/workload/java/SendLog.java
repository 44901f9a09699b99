package dev.acklab;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The fate of one producer's planned messages, local indices {@code 0 .. count - 1}, kept in arrays
 * sized once (a report writes into them, it allocates nothing), and the file they are written to
 * ({@code .java.bin}): each {@link Column} in declaration order, {@code count} little-endian values
 * each. {@code acklab.workload.sendlog.REPORT_COLUMNS} declares the same layout for the reader;
 * tests/unit/test_workload_evidence.py writes a file here and reads it there.
 *
 * <p>Depends on java.* only, so that test compiles it alone.
 */
final class SendLog {
    static final int NO_ERROR = 0;
    static final int UNREPORTED = Integer.MIN_VALUE; // as acklab.workload.sendlog.UNREPORTED

    /** The columns of the file, in order: name and numpy dtype (as the reader declares them). */
    enum Column {
        SEND_TS("send_ts", "<f8"),
        ACK_TS("ack_ts", "<f8"),
        PARTITION("partition", "<i4"),
        OFFSET("offset", "<i8"),
        ERROR("error", "<i4"),
        REFUSED("refused", "u1");

        final String field;
        final String dtype;

        Column(String field, String dtype) {
            this.field = field;
            this.dtype = dtype;
        }
    }

    final int producer, count;
    final long firstId;
    final double[] sendTs, ackTs;
    final int[] partition, error;
    final long[] offset;
    final boolean[] refused;
    final AtomicLong acked = new AtomicLong(), failed = new AtomicLong(), reported = new AtomicLong();
    /** Set when the load is over: reports after it are not evidence, their messages stay unreported. */
    volatile boolean abandoned;

    SendLog(int producer, long firstId, int count) {
        this.producer = producer;
        this.firstId = firstId;
        this.count = count;
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
    }

    /**
     * The delivery report of message {@code index}: its partition (-1: unknown), and its offset when
     * {@code code} is NO_ERROR, else the error's code and whether send() itself refused it. Ignored once
     * abandoned; IllegalStateException for a second report of one message.
     */
    void report(int index, int partitionOf, long offsetOf, int code, boolean refusedOf) {
        if (abandoned) {
            return;
        }
        synchronized (this) {
            if (error[index] != UNREPORTED) {
                throw new IllegalStateException("p" + producer + ": more than one delivery report for id " + (firstId + index));
            }
            ackTs[index] = Clock.now();
            if (partitionOf >= 0) {
                partition[index] = partitionOf;
            }
            if (code == NO_ERROR) {
                error[index] = NO_ERROR;
                offset[index] = offsetOf;
                acked.incrementAndGet();
            } else {
                error[index] = code;
                refused[index] = refusedOf;
                failed.incrementAndGet();
            }
            reported.incrementAndGet();
        }
    }

    /** Write every column (all {@code count} messages) to {@code path}, replacing it. */
    synchronized void write(Path path) throws IOException {
        try (FileChannel channel = FileChannel.open(path, StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
            ByteBuffer buffer = ByteBuffer.allocate(1 << 20).order(ByteOrder.LITTLE_ENDIAN);
            for (Column column : Column.values()) {
                for (int i = 0; i < count; i++) {
                    if (buffer.remaining() < 8) {
                        buffer.flip();
                        channel.write(buffer);
                        buffer.clear();
                    }
                    put(buffer, column, i);
                }
            }
            buffer.flip();
            channel.write(buffer);
        }
    }

    private void put(ByteBuffer buffer, Column column, int i) {
        switch (column) {
            case SEND_TS: buffer.putDouble(sendTs[i]); break;
            case ACK_TS: buffer.putDouble(ackTs[i]); break;
            case PARTITION: buffer.putInt(partition[i]); break;
            case OFFSET: buffer.putLong(offset[i]); break;
            case ERROR: buffer.putInt(error[i]); break;
            case REFUSED: buffer.put((byte) (refused[i] ? 1 : 0)); break;
            default: throw new AssertionError(column);
        }
    }
}
