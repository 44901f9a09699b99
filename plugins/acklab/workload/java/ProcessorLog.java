package dev.acklab;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A processor's log (processing.py's "Log"): JSON lines, one event per line with {@code t} (epoch
 * seconds) and {@code ev} first, each line written with one unbuffered write, so it is in the file
 * when the call returns (before the process stops or is killed).
 */
final class ProcessorLog implements AutoCloseable {
    private final FileOutputStream out;

    ProcessorLog(String path) throws IOException {
        out = new FileOutputStream(path, true);
    }

    /** Log event {@code ev} with {@code fields}: name, value, name, value, ... */
    synchronized void event(String ev, Object... fields) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("t", Clock.now());
        line.put("ev", ev);
        for (int i = 0; i + 1 < fields.length; i += 2) {
            line.put((String) fields[i], fields[i + 1]);
        }
        try {
            out.write((Json.write(line) + "\n").getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public synchronized void close() throws IOException {
        out.close();
    }
}
