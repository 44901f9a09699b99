package dev.acklab;

/** Why the load ends early: the first reason given wins; {@link #requested} is read once per record. */
final class Stop {
    static final String DEADLINE = "duration_s reached";
    static final String SIGTERM = "stopped by SIGTERM";
    static final String PARENT_GONE = "the parent process went away"; // the worker's connection ended

    volatile boolean requested;
    volatile String reason;

    void request(String why) {
        if (reason == null) {
            reason = why;
        }
        requested = true;
    }
}
