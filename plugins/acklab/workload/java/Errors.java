package dev.acklab;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.UnsupportedVersionException;

/**
 * The errors one producer met: each named by its Java exception class and numbered 1, 2, ... in the
 * order first met (the send log's error codes; 0 is SendLog.NO_ERROR), with whether it is retriable,
 * and which errors leave the producer unusable.
 */
final class Errors {
    private final int producer;
    private final Map<String, Integer> codes = new LinkedHashMap<>();
    private final List<Boolean> retriable = new ArrayList<>();

    Errors(int producer) {
        this.producer = producer;
    }

    /** The code of {@code exception}'s class; the first of a class is logged with its message, as users quote it. */
    synchronized int code(Throwable exception) {
        String name = exception.getClass().getSimpleName();
        Integer code = codes.get(name);
        if (code == null) {
            code = codes.size() + 1;
            codes.put(name, code);
            retriable.add(isRetriable(exception));
            System.err.println("p" + producer + " first " + name + ": " + exception.getMessage());
        }
        return code;
    }

    static boolean isRetriable(Throwable exception) {
        return exception instanceof RetriableException;
    }

    /** The errors after which KafkaProducer's documentation says the producer can only be closed. */
    static boolean isFatal(RuntimeException e) {
        return e instanceof ProducerFencedException || e instanceof OutOfOrderSequenceException
            || e instanceof AuthorizationException || e instanceof UnsupportedVersionException
            || e instanceof FencedInstanceIdException;
    }

    /** {@code {"<code>": "<name>", ...}}, in code order. */
    synchronized String namesJson() {
        StringBuilder names = new StringBuilder("{");
        for (Map.Entry<String, Integer> entry : codes.entrySet()) {
            names.append(names.length() > 1 ? ", " : "").append(Json.quote(Integer.toString(entry.getValue()))).append(": ").append(Json.quote(entry.getKey()));
        }
        return names.append("}").toString();
    }

    /** {@code [code, ...]}: the retriable errors' codes, in order. */
    synchronized String retriableJson() {
        StringBuilder out = new StringBuilder("[");
        for (int code = 1; code <= retriable.size(); code++) {
            if (retriable.get(code - 1)) {
                out.append(out.length() > 1 ? ", " : "").append(code);
            }
        }
        return out.append("]").toString();
    }
}
