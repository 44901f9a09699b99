package dev.acklab;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * JSON text for the driver's one-line outputs, and the little JSON the driver reads (a processor's job):
 * the driver depends on nothing beyond kafka-clients.
 */
final class Json {
    private Json() {
    }

    /** {@code text} as a JSON string, or {@code null}. */
    static String quote(String text) {
        if (text == null) {
            return "null";
        }
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            switch (c) {
                case '"': out.append("\\\""); break;
                case '\\': out.append("\\\\"); break;
                default:
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        return out.append('"').toString();
    }

    /**
     * {@code value} as JSON text: null, a Boolean, a Number, a String, a Map (its keys as strings, in
     * its order) or a List.
     */
    static String write(Object value) {
        StringBuilder out = new StringBuilder();
        write(out, value);
        return out.toString();
    }

    static void write(StringBuilder out, Object value) {
        if (value == null || value instanceof Boolean || value instanceof Integer || value instanceof Long) {
            out.append(value);
        } else if (value instanceof Number) {
            double number = ((Number) value).doubleValue();
            out.append(Double.isFinite(number) ? new BigDecimal(Double.toString(number)).toPlainString() : "null"); // 1747000000.25, not 1.74700000025E9
        } else if (value instanceof Map) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
                out.append(first ? "" : ", ").append(quote(String.valueOf(entry.getKey()))).append(": ");
                write(out, entry.getValue());
                first = false;
            }
            out.append('}');
        } else if (value instanceof List) {
            out.append('[');
            boolean first = true;
            for (Object item : (List<?>) value) {
                out.append(first ? "" : ", ");
                write(out, item);
                first = false;
            }
            out.append(']');
        } else {
            out.append(quote(value.toString()));
        }
    }

    /**
     * The value of JSON text: null, Boolean, Long (an integer), Double, String, Map (LinkedHashMap,
     * in the text's order) or List. IllegalArgumentException, naming the position, for text that is
     * not JSON.
     */
    static Object parse(String text) {
        Parser parser = new Parser(text);
        Object value = parser.value();
        parser.space();
        if (parser.at < text.length()) {
            throw parser.error("trailing text");
        }
        return value;
    }

    private static final class Parser {
        private final String text;
        int at;

        Parser(String text) {
            this.text = text;
        }

        IllegalArgumentException error(String what) {
            return new IllegalArgumentException("JSON: " + what + " at character " + at);
        }

        void space() {
            while (at < text.length() && Character.isWhitespace(text.charAt(at))) {
                at++;
            }
        }

        char next() {
            space();
            if (at >= text.length()) {
                throw error("unexpected end");
            }
            return text.charAt(at);
        }

        void expect(char c) {
            if (next() != c) {
                throw error("'" + c + "' expected");
            }
            at++;
        }

        Object value() {
            char c = next();
            if (c == '{') {
                at++;
                Map<String, Object> map = new LinkedHashMap<>();
                if (next() == '}') {
                    at++;
                    return map;
                }
                do {
                    if (next() != '"') {
                        throw error("a key expected");
                    }
                    String key = string();
                    expect(':');
                    map.put(key, value());
                } while (comma('}'));
                return map;
            }
            if (c == '[') {
                at++;
                List<Object> list = new ArrayList<>();
                if (next() == ']') {
                    at++;
                    return list;
                }
                do {
                    list.add(value());
                } while (comma(']'));
                return list;
            }
            if (c == '"') {
                return string();
            }
            for (String word : new String[] {"true", "false", "null"}) {
                if (text.startsWith(word, at)) {
                    at += word.length();
                    return word.equals("null") ? null : Boolean.valueOf(word.equals("true"));
                }
            }
            int start = at;
            while (at < text.length() && "+-0123456789.eE".indexOf(text.charAt(at)) >= 0) {
                at++;
            }
            String number = text.substring(start, at);
            try {
                return number.matches("-?\\d+") ? (Object) Long.valueOf(number) : (Object) Double.valueOf(number);
            } catch (NumberFormatException e) {
                at = start;
                throw error("a value expected");
            }
        }

        /** After an item: true at a comma (another item follows), false at {@code close}. */
        private boolean comma(char close) {
            char c = next();
            at++;
            if (c == ',') {
                return true;
            }
            if (c != close) {
                at--;
                throw error("',' or '" + close + "' expected");
            }
            return false;
        }

        private String string() {
            at++; // the opening quote
            StringBuilder out = new StringBuilder();
            while (true) {
                if (at >= text.length()) {
                    throw error("unterminated string");
                }
                char c = text.charAt(at++);
                if (c == '"') {
                    return out.toString();
                }
                if (c != '\\') {
                    out.append(c);
                    continue;
                }
                if (at >= text.length()) {
                    throw error("unterminated string");
                }
                char escaped = text.charAt(at++);
                switch (escaped) {
                    case 'b': out.append('\b'); break;
                    case 'f': out.append('\f'); break;
                    case 'n': out.append('\n'); break;
                    case 'r': out.append('\r'); break;
                    case 't': out.append('\t'); break;
                    case 'u':
                        if (at + 4 > text.length()) {
                            throw error("bad \\u escape");
                        }
                        out.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
                        at += 4;
                        break;
                    default: out.append(escaped); // " \ /
                }
            }
        }
    }
}
