package dev.acklab;

import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * One JVM serving every Java producer of its owner ({@code AcklabProducer host SOCKET}): the producers
 * of a scenario group are separate {@link ProducerRun}s, each its own {@code KafkaProducer}, send log,
 * statistics and record, on a connection of its own to the Unix socket SOCKET (whose folder only the
 * owner can enter).
 *
 * <p>On a connection: {@code run JOB} (the job's properties file), then the protocol of
 * {@link ProducerRun} both ways ({@code ready <partitions>}, {@code go}, {@code stop <reason>}), and last
 * the host's {@code exit <code>}: 0 once the record is written (or the run was never told to go), 1 after
 * an error the run could not record. The connection closing before the end stops the run as its
 * worker's going away does ({@link Stop#PARENT_GONE}); its record is still written.
 *
 * <p>Everything a run's threads print to stderr (the client's log, the run's own messages), its
 * {@code KafkaProducer}'s network thread included, goes to the run's own log, {@code out.prefix + .java.log}
 * ({@link RoutedErr}).
 *
 * <p>The host prints {@code listening} once the socket is bound. Its stdin is held only by its owner: at
 * its end (the owner exited, or was killed) every run is stopped, their records written, the socket and
 * its folder removed, and the host exits; on SIGTERM the runs are stopped the same way.
 */
final class ProducerHost {
    static final String LOG_SUFFIX = ".java.log";

    private ProducerHost() {
    }

    static void serve(Path socket) throws IOException, InterruptedException {
        RoutedErr.install();
        ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        server.bind(UnixDomainSocketAddress.of(socket));
        Runtime.getRuntime().addShutdownHook(new Thread(() -> ProducerRun.stopAll(Stop.SIGTERM)));
        Thread owner = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // the owner writes nothing: only its end matters
                }
            } catch (IOException ignored) {
                // as its end
            }
            try {
                server.close();
            } catch (IOException ignored) {
                // closing anyway
            }
        }, "acklab-host-owner");
        owner.setDaemon(true);
        owner.start();
        System.out.println("listening");
        System.out.flush();
        while (true) {
            SocketChannel connection;
            try {
                connection = server.accept();
            } catch (ClosedChannelException closed) {
                break;
            }
            Thread run = new Thread(() -> serveOne(connection), "acklab-run");
            run.start();
        }
        ProducerRun.stopAll(Stop.PARENT_GONE);
        Files.deleteIfExists(socket);
        Files.deleteIfExists(socket.getParent()); // the owner's folder for it, empty now
        System.exit(0);
    }

    /** One connection: its run from {@code run JOB} to {@code exit <code>}. */
    private static void serveOne(SocketChannel connection) {
        try (connection) {
            PrintStream out = new PrintStream(new ChannelOut(connection), true, StandardCharsets.UTF_8);
            out.println("exit " + runOne(connection, out));
        } catch (IOException e) {
            e.printStackTrace();
        }
    }

    /** The run a connection names, from its {@code run JOB} to its record; its exit code. */
    private static int runOne(SocketChannel connection, PrintStream out) {
        BufferedReader in = new BufferedReader(new InputStreamReader(new ChannelIn(connection), StandardCharsets.UTF_8));
        Job job;
        try {
            String first = in.readLine();
            if (first == null || !first.startsWith("run ")) {
                return 2;
            }
            job = new Job(AcklabProducer.load(Paths.get(first.substring(4).trim())));
        } catch (IOException | RuntimeException e) {
            e.printStackTrace();
            return 2;
        }
        try (PrintStream log = new PrintStream(new FileOutputStream(job.prefix + LOG_SUFFIX, true), true, StandardCharsets.UTF_8)) {
            RoutedErr.route(log);
            try {
                new ProducerRun(job, in, out).run();
                return 0;
            } catch (Exception | Error e) {
                e.printStackTrace();
                return 1;
            } finally {
                RoutedErr.route(null);
            }
        } catch (IOException e) {
            e.printStackTrace();
            return 1;
        }
    }

    /** Reads of a channel, without the stream adapters' lock that would block the writes of another thread. */
    private static final class ChannelIn extends InputStream {
        private final SocketChannel channel;

        ChannelIn(SocketChannel channel) {
            this.channel = channel;
        }

        @Override
        public int read() throws IOException {
            byte[] one = new byte[1];
            return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            try {
                return len == 0 ? 0 : channel.read(ByteBuffer.wrap(b, off, len));
            } catch (ClosedChannelException closed) {
                return -1;
            }
        }
    }

    /** Writes of a channel (see {@link ChannelIn}). */
    private static final class ChannelOut extends OutputStream {
        private final SocketChannel channel;

        ChannelOut(SocketChannel channel) {
            this.channel = channel;
        }

        @Override
        public void write(int b) throws IOException {
            write(new byte[] {(byte) b}, 0, 1);
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            ByteBuffer buffer = ByteBuffer.wrap(b, off, len);
            while (buffer.hasRemaining()) {
                channel.write(buffer);
            }
        }
    }
}
