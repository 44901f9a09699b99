package dev.acklab;

import java.io.IOException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * acklab's Java producer driver: the producers of a load, on the Java client (kafka-clients).
 * The classes of package dev.acklab, one job each: this entry point and the producer's configuration,
 * {@link ProducerRun} (a job from start to record), {@link SendLoop}, {@link Transactions},
 * {@link Errors}, {@link Stats}, {@link SendLog} (the per-message record and its file). They use only
 * API present in kafka-clients 3.0, so one source compiles against every supported version.
 *
 * <p>{@code validate FILE...}: for each producer properties file, one JSON line on stdout:
 * {@code {"property": P|null, "error": MESSAGE|null, "idempotence": true|false|null}}, the client's own
 * verdict (an unknown property, an invalid value, a conflict its ProducerConfig or KafkaProducer
 * constructor rejects) and, where the client says, whether it enables idempotence.
 *
 * <p>{@code validate-consumer FILE...}: for each consumer properties file (a pipeline processor's), one
 * JSON line {@code {"property": P|null, "error": MESSAGE|null}}: an unknown property, or a value its
 * ConsumerConfig rejects. No consumer is built.
 *
 * <p>{@code read FILE}: the properties of a file as java.util.Properties reads it, one JSON object.
 *
 * <p>{@code host SOCKET}: the {@link ProducerHost} of {@code acklab.workload.java_host}, one JVM running
 * each producer of a load as a {@link ProducerRun} of the job ({@link Job}, a properties file written by
 * {@code acklab.workload.java_worker}) its connection names.
 *
 * <p>{@code process JOB}: one pipeline processor instance ({@link Processor}, the consume-transform-produce
 * loop of {@code acklab.workload.processing}); the job is the JSON file of its ProcessorJob ({@link ProcessorJob}).
 * Exits 0 when stopped (SIGTERM, its parent gone), 1 after an error it could not handle.
 *
 * <p>{@code version}: the kafka-clients version on the class path.
 */
public final class AcklabProducer {
    static final Pattern CONFIG_NAME = Pattern.compile("(?:for configuration|configuration) ['`]?([a-z0-9._-]+)");

    private AcklabProducer() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length >= 1 && args[0].equals("validate")) {
            for (int i = 1; i < args.length; i++) {
                System.out.println(validate(load(Paths.get(args[i]))));
            }
        } else if (args.length >= 1 && args[0].equals("validate-consumer")) {
            for (int i = 1; i < args.length; i++) {
                System.out.println(validateConsumer(load(Paths.get(args[i]))));
            }
        } else if (args.length == 2 && args[0].equals("host")) {
            ProducerHost.serve(Paths.get(args[1]));
        } else if (args.length == 2 && args[0].equals("process")) {
            System.exit(Processor.main(ProcessorJob.read(Paths.get(args[1]))));
        } else if (args.length == 2 && args[0].equals("read")) {
            Properties properties = load(Paths.get(args[1]));
            StringBuilder out = new StringBuilder("{");
            for (String name : new TreeSet<>(properties.stringPropertyNames())) {
                out.append(out.length() > 1 ? ", " : "").append(Json.quote(name)).append(": ").append(Json.quote(properties.getProperty(name)));
            }
            System.out.println(out.append("}"));
        } else if (args.length == 1 && args[0].equals("version")) {
            System.out.println(AppInfoParser.getVersion());
        } else {
            System.err.println("usage: AcklabProducer validate FILE... | validate-consumer FILE... | read FILE | host SOCKET | process JOB | version");
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

    /** The producer's configuration: the file's properties, the bootstrap servers, byte-array serializers. */
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

    static String validate(Properties properties) {
        for (String name : properties.stringPropertyNames()) {
            if (!ProducerConfig.configNames().contains(name)) {
                return "{\"property\": " + Json.quote(name) + ", \"error\": " + Json.quote("unknown producer property " + name) + ", \"idempotence\": null}";
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
            return "{\"property\": " + Json.quote(property) + ", \"error\": " + Json.quote(message) + ", \"idempotence\": null}";
        }
        return "{\"property\": null, \"error\": null, \"idempotence\": " + idempotence + "}";
    }

    static String validateConsumer(Properties properties) {
        Map<String, Object> config = new HashMap<>();
        for (String name : properties.stringPropertyNames()) {
            if (!ConsumerConfig.configNames().contains(name)) {
                return "{\"property\": " + Json.quote(name) + ", \"error\": " + Json.quote("unknown consumer property " + name) + "}";
            }
            config.put(name, properties.getProperty(name));
        }
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, "127.0.0.1:9");
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try {
            new ConsumerConfig(config);
        } catch (Exception e) {
            String message = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
            Matcher matcher = CONFIG_NAME.matcher(message);
            return "{\"property\": " + Json.quote(matcher.find() ? matcher.group(1) : null) + ", \"error\": " + Json.quote(message) + "}";
        }
        return "{\"property\": null, \"error\": null}";
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
}
