package dev.acklab;

import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;

/**
 * System.err, routed by thread: a thread whose run set a log ({@link #route}), and every thread it
 * starts afterwards (the {@code KafkaProducer}'s network thread, the statistics sampler), print into
 * that log; the others into the process's stderr. The client's logger (slf4j-simple) looks System.err
 * up at each line, so its lines follow the run too.
 */
final class RoutedErr extends OutputStream {
    private static final InheritableThreadLocal<PrintStream> TARGET = new InheritableThreadLocal<>();
    private final PrintStream fallback;

    private RoutedErr(PrintStream fallback) {
        this.fallback = fallback;
    }

    static synchronized void install() {
        if (!(System.err instanceof Installed)) {
            System.setErr(new Installed(new RoutedErr(System.err)));
        }
    }

    /** This thread's (and its future threads') log; null: the process's stderr again. */
    static void route(PrintStream log) {
        if (log == null) {
            TARGET.remove();
        } else {
            TARGET.set(log);
        }
    }

    private PrintStream target() {
        PrintStream log = TARGET.get();
        return log == null ? fallback : log;
    }

    @Override
    public void write(int b) throws IOException {
        target().write(b);
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
        target().write(b, off, len);
    }

    @Override
    public void flush() throws IOException {
        target().flush();
    }

    private static final class Installed extends PrintStream {
        Installed(RoutedErr routed) {
            super(routed, true);
        }
    }
}
