package dev.acklab;

/** JSON text for the driver's one-line outputs (the driver depends on nothing beyond kafka-clients). */
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
}
