// JSON for execrl's Java call harness (ExecrlCall.java): a bounded parser for the test arguments, the
// conversion of a parsed value to a method's declared parameter type, and the writer of returned values.
import java.lang.reflect.Array;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.Type;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

final class ExecrlJson {
    private static final int MAX_DEPTH = 100;
    private final String text;
    private int at;

    private ExecrlJson(String text) {
        this.text = text;
    }

    /** null, Boolean, Long (BigInteger beyond), Double, String, ArrayList, LinkedHashMap. */
    static Object parse(String text) {
        ExecrlJson parser = new ExecrlJson(text);
        Object value = parser.value(0);
        parser.space();
        if (parser.at != text.length()) {
            throw new IllegalArgumentException("trailing data in JSON");
        }
        return value;
    }

    private void space() {
        while (at < text.length() && Character.isWhitespace(text.charAt(at))) {
            at++;
        }
    }

    private Object value(int depth) {
        if (depth > MAX_DEPTH) {
            throw new IllegalArgumentException("JSON nested too deep");
        }
        space();
        char c = text.charAt(at);
        if (c == '[') {
            List<Object> list = new ArrayList<>();
            at++;
            space();
            if (text.charAt(at) == ']') {
                at++;
                return list;
            }
            while (true) {
                list.add(value(depth + 1));
                space();
                if (text.charAt(at++) == ']') {
                    return list;
                }
            }
        }
        if (c == '{') {
            Map<String, Object> map = new LinkedHashMap<>();
            at++;
            space();
            if (text.charAt(at) == '}') {
                at++;
                return map;
            }
            while (true) {
                space();
                String key = string();
                space();
                at++;  // ':'
                map.put(key, value(depth + 1));
                space();
                if (text.charAt(at++) == '}') {
                    return map;
                }
            }
        }
        if (c == '"') {
            return string();
        }
        return literal();
    }

    private Object literal() {
        int start = at;
        while (at < text.length() && ",]} \n\t\r".indexOf(text.charAt(at)) < 0) {
            at++;
        }
        String word = text.substring(start, at);
        switch (word) {
            case "null": return null;
            case "true": return Boolean.TRUE;
            case "false": return Boolean.FALSE;
            case "NaN": return Double.NaN;
            case "Infinity": return Double.POSITIVE_INFINITY;
            case "-Infinity": return Double.NEGATIVE_INFINITY;
            default: break;
        }
        if (word.contains(".") || word.contains("e") || word.contains("E")) {
            return Double.parseDouble(word);
        }
        BigInteger number = new BigInteger(word);
        return number.bitLength() < 64 ? (Object) number.longValue() : number;
    }

    private String string() {
        StringBuilder out = new StringBuilder();
        at++;  // opening quote
        while (true) {
            char c = text.charAt(at++);
            if (c == '"') {
                return out.toString();
            }
            if (c != '\\') {
                out.append(c);
                continue;
            }
            char e = text.charAt(at++);
            switch (e) {
                case 'n': out.append('\n'); break;
                case 't': out.append('\t'); break;
                case 'r': out.append('\r'); break;
                case 'b': out.append('\b'); break;
                case 'f': out.append('\f'); break;
                case 'u': out.append((char) Integer.parseInt(text.substring(at, at + 4), 16)); at += 4; break;
                default: out.append(e);
            }
        }
    }

    /** ``value`` (parsed JSON) as an instance of ``type``; IllegalArgumentException when it is not one. */
    static Object convert(Object value, Type type, int depth) {
        if (depth > MAX_DEPTH) {
            throw new IllegalArgumentException("nested too deep");
        }
        if (type instanceof ParameterizedType) {
            ParameterizedType generic = (ParameterizedType) type;
            return container(value, (Class<?>) generic.getRawType(), generic.getActualTypeArguments(), depth);
        }
        if (!(type instanceof Class)) {
            return value;  // a type variable or wildcard: the parsed value as it is
        }
        Class<?> cls = (Class<?>) type;
        Object scalar = scalar(value, cls);
        if (scalar != null || value == null) {
            return scalar;
        }
        if (cls.isArray()) {
            List<?> items = (List<?>) value;
            Object array = Array.newInstance(cls.getComponentType(), items.size());
            for (int k = 0; k < items.size(); k++) {
                Array.set(array, k, convert(items.get(k), cls.getComponentType(), depth + 1));
            }
            return array;
        }
        if (cls == Object.class || cls.isInstance(value)) {
            return value;
        }
        return container(value, cls, new Type[] {Object.class, Object.class}, depth);
    }

    private static Object scalar(Object value, Class<?> cls) {
        if (value == null) {
            if (cls.isPrimitive()) {
                throw new IllegalArgumentException("null for a " + cls.getName());
            }
            return null;
        }
        if (cls == long.class || cls == Long.class) return exactLong(value);
        if (cls == int.class || cls == Integer.class) return Math.toIntExact(exactLong(value));
        if (cls == short.class || cls == Short.class) return (short) ranged(exactLong(value), Short.MIN_VALUE, Short.MAX_VALUE);
        if (cls == byte.class || cls == Byte.class) return (byte) ranged(exactLong(value), Byte.MIN_VALUE, Byte.MAX_VALUE);
        if (cls == double.class || cls == Double.class) return ((Number) value).doubleValue();
        if (cls == float.class || cls == Float.class) return ((Number) value).floatValue();
        if (cls == boolean.class || cls == Boolean.class) return (Boolean) value;
        if (cls == BigInteger.class) return new BigInteger(integral(value).toString());
        if (cls == BigDecimal.class) return new BigDecimal(value.toString());
        if (cls == String.class) return (String) value;
        if (cls == char.class || cls == Character.class) {
            String text = (String) value;
            if (text.length() != 1) {
                throw new IllegalArgumentException("a string of length " + text.length() + " for a char");
            }
            return text.charAt(0);
        }
        return null;
    }

    /** An integer argument as a long; one beyond long's range is an error, never wrapped around. */
    private static long exactLong(Object value) {
        Object number = integral(value);
        return number instanceof BigInteger ? ((BigInteger) number).longValueExact() : (Long) number;
    }

    private static long ranged(long value, long low, long high) {
        if (value < low || value > high) {
            throw new ArithmeticException(value + " is out of range [" + low + ", " + high + "]");
        }
        return value;
    }

    private static Object integral(Object value) {
        if (value instanceof Long || value instanceof BigInteger) {
            return value;
        }
        throw new IllegalArgumentException("expected an integer, got " + describe(value));
    }

    private static String describe(Object value) {
        return value == null ? "null" : value.getClass().getSimpleName();
    }

    @SuppressWarnings("unchecked")
    private static Object container(Object value, Class<?> raw, Type[] args, int depth) {
        if (raw == Optional.class) {
            return Optional.ofNullable(convert(value, args[0], depth + 1));
        }
        if (Map.class.isAssignableFrom(raw)) {
            Map<Object, Object> map = raw.isInterface() ? new HashMap<>() : (Map<Object, Object>) create(raw);
            for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
                Object key = convert(keyValue((String) entry.getKey(), args[0]), args[0], depth + 1);
                map.put(key, convert(entry.getValue(), args[1], depth + 1));
            }
            return map;
        }
        if (Collection.class.isAssignableFrom(raw) || raw == Iterable.class) {
            Collection<Object> out = !raw.isInterface() ? (Collection<Object>) create(raw)
                : Set.class.isAssignableFrom(raw) ? new HashSet<>() : new ArrayList<>();
            for (Object item : (List<?>) value) {
                out.add(convert(item, args[0], depth + 1));
            }
            return out;
        }
        throw new IllegalArgumentException("cannot pass " + describe(value) + " as a " + raw.getName());
    }

    private static Object keyValue(String key, Type type) {
        if (type == Long.class || type == Integer.class || type == Short.class || type == Byte.class) {
            return new BigInteger(key).bitLength() < 64 ? (Object) Long.parseLong(key) : new BigInteger(key);
        }
        if (type == Double.class || type == Float.class) {
            return Double.parseDouble(key);
        }
        return key;
    }

    private static Object create(Class<?> raw) {
        try {
            return raw.getDeclaredConstructor().newInstance();
        } catch (ReflectiveOperationException error) {
            throw new IllegalArgumentException("cannot create a " + raw.getName());
        }
    }

    /** Writes ``value`` as JSON (arrays, collections, maps, optionals, boxed scalars, strings, chars). */
    static void write(Object value, StringBuilder out, int depth) {
        if (depth > MAX_DEPTH) {
            throw new IllegalArgumentException("nested too deep");
        }
        if (value == null || value instanceof Boolean || value instanceof Long || value instanceof Integer
            || value instanceof Short || value instanceof Byte || value instanceof BigInteger) {
            out.append(value);
        } else if (value instanceof Double || value instanceof Float || value instanceof BigDecimal) {
            double number = ((Number) value).doubleValue();
            out.append(Double.isNaN(number) ? "NaN" : Double.isInfinite(number)
                ? (number > 0 ? "Infinity" : "-Infinity") : value.toString());
        } else if (value instanceof String || value instanceof Character) {
            out.append(quote(value.toString()));
        } else if (value instanceof Optional) {
            write(((Optional<?>) value).orElse(null), out, depth + 1);
        } else if (value.getClass().isArray()) {
            out.append('[');
            for (int k = 0; k < Array.getLength(value); k++) {
                out.append(k == 0 ? "" : ",");
                write(Array.get(value, k), out, depth + 1);
            }
            out.append(']');
        } else if (value instanceof Iterable) {
            out.append('[');
            String comma = "";
            for (Object item : (Iterable<?>) value) {
                out.append(comma);
                write(item, out, depth + 1);
                comma = ",";
            }
            out.append(']');
        } else if (value instanceof Map) {
            out.append('{');
            String comma = "";
            for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
                out.append(comma).append(quote(String.valueOf(entry.getKey()))).append(':');
                write(entry.getValue(), out, depth + 1);
                comma = ",";
            }
            out.append('}');
        } else {
            throw new IllegalArgumentException("a " + value.getClass().getName() + " is not a JSON value");
        }
    }

    static String quote(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (int k = 0; k < text.length(); k++) {
            char c = text.charAt(k);
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20 || (c >= 0xD800 && c <= 0xDFFF)) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
