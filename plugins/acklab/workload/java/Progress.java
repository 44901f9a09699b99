package dev.acklab;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;

/** This producer's slot in the load's progress file (acklab.workload.worker.PROGRESS_FILE): three
 * little-endian longs at {@code 24 * producer}: sent, acknowledged, failed. */
final class Progress {
    private final MappedByteBuffer slot;

    Progress(String file, int producer) throws IOException {
        try (RandomAccessFile raf = new RandomAccessFile(file, "rw")) {
            slot = raf.getChannel().map(FileChannel.MapMode.READ_WRITE, 24L * producer, 24);
            slot.order(ByteOrder.LITTLE_ENDIAN);
        }
    }

    void publish(long sent, long acked, long failed) {
        slot.putLong(0, sent);
        slot.putLong(8, acked);
        slot.putLong(16, failed);
    }
}
