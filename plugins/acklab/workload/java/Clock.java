package dev.acklab;

/** Epoch seconds from the monotonic clock: every timestamp the driver records comes from {@link #now}. */
final class Clock {
    private static final long EPOCH_NANOS_0 = System.currentTimeMillis() * 1_000_000L, NANOS_0 = System.nanoTime();

    private Clock() {
    }

    static double now() {
        return (EPOCH_NANOS_0 + (System.nanoTime() - NANOS_0)) / 1e9;
    }
}
