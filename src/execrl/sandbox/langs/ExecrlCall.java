// execrl's function-call harness for Java: execrl/sandbox/langs/jvm.py.
// Usage: java ExecrlCall < tests, where stdin holds one JSON line {"max_bytes": N} and then one line per
// test {"i": k, "entry_point": "name" or "Class.name", "args": [...]}. It loads the candidate's classes
// (the .class files javac wrote next to it), then calls each test's method and writes one JSON record
// per line to fd 3: {"kind": "loaded"} or {"kind": "program_error", ...}, then {"i": k, "status":
// "value" | "error" | "unserializable" | "too_large", ...}. Records carry returned values only: expected
// values never enter the sandbox, and the sandbox's harness validates every line (testgroups.GroupState).
import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.Type;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

public final class ExecrlCall {
    private static FileOutputStream records;

    public static void main(String[] argv) throws IOException, ReflectiveOperationException {
        records = recordStream();
        String[] lines = readAll(System.in).split("\n");
        long maxBytes = ((Number) ((Map<?, ?>) ExecrlJson.parse(lines[0])).get("max_bytes")).longValue();
        List<Class<?>> classes = new ArrayList<>();
        try {
            for (String name : candidateClasses()) {
                classes.add(Class.forName(name, true, ExecrlCall.class.getClassLoader()));
            }
        } catch (Throwable error) {
            Throwable cause = error instanceof ExceptionInInitializerError && error.getCause() != null
                ? error.getCause() : error;
            send("{\"kind\":\"program_error\"," + errorFields(cause) + "}");
            System.exit(0);
        }
        send("{\"kind\":\"loaded\"}");
        for (int line = 1; line < lines.length; line++) {
            if (lines[line].isEmpty()) {
                continue;
            }
            Map<?, ?> test = (Map<?, ?>) ExecrlJson.parse(lines[line]);
            long start = System.nanoTime();
            String result = runTest(classes, (String) test.get("entry_point"), (List<?>) test.get("args"), maxBytes);
            double wall = (System.nanoTime() - start) / 1e9;
            send("{\"i\":" + test.get("i") + "," + result + ",\"wall_s\":" + wall + "}");
        }
        System.out.flush();
        System.exit(0);
    }

    /** fd 3 as a stream. Reopening ``/proc/self/fd/3`` is refused (the pipe belongs to the sandbox's
     * harness uid), so the descriptor is wrapped as it is, which needs ``--add-opens java.base/java.io``. */
    private static FileOutputStream recordStream() throws ReflectiveOperationException {
        FileDescriptor descriptor = new FileDescriptor();
        Field field = FileDescriptor.class.getDeclaredField("fd");
        field.setAccessible(true);
        field.setInt(descriptor, 3);
        return new FileOutputStream(descriptor);
    }

    private static String readAll(InputStream in) throws IOException {
        return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }

    private static void send(String record) throws IOException {
        records.write((record + "\n").getBytes(StandardCharsets.UTF_8));
        records.flush();
    }

    /** Top-level classes javac wrote into the work directory, the harness's own excluded. */
    private static List<String> candidateClasses() {
        List<String> names = new ArrayList<>();
        String[] files = new File(".").list();
        if (files == null) {
            return names;
        }
        java.util.Arrays.sort(files);
        for (String file : files) {
            if (file.endsWith(".class") && !file.contains("$") && !file.startsWith("ExecrlCall")
                && !file.startsWith("ExecrlJson")) {
                names.add(file.substring(0, file.length() - ".class".length()));
            }
        }
        return names;
    }

    private static String runTest(List<Class<?>> classes, String entry, List<?> args, long maxBytes) {
        Object value;
        try {
            value = call(classes, entry, args);
        } catch (InvocationTargetException error) {
            return "\"status\":\"error\"," + errorFields(error.getCause());
        } catch (Throwable error) {
            return "\"status\":\"error\"," + errorFields(error);
        }
        StringBuilder text = new StringBuilder();
        try {
            ExecrlJson.write(value, text, 0);
        } catch (IllegalArgumentException error) {
            String type = value == null ? "null" : value.getClass().getSimpleName();
            return "\"status\":\"unserializable\",\"type\":" + ExecrlJson.quote(type)
                + ",\"message\":" + ExecrlJson.quote(String.valueOf(error.getMessage()));
        }
        if (text.length() > maxBytes) {
            return "\"status\":\"too_large\"";
        }
        return "\"status\":\"value\",\"value\":" + ExecrlJson.quote(text.toString());
    }

    /** Calls the one method named ``entry`` (``Class.method`` or ``method``) whose arity matches and whose
     * parameter types the arguments convert to; an instance method gets a fresh no-argument instance. */
    private static Object call(List<Class<?>> classes, String entry, List<?> args) throws Throwable {
        String owner = entry.contains(".") ? entry.substring(0, entry.indexOf('.')) : null;
        String name = entry.substring(entry.indexOf('.') + 1);
        IllegalArgumentException mismatch = null;
        for (Class<?> cls : classes) {
            if (owner != null && !cls.getSimpleName().equals(owner)) {
                continue;
            }
            for (Method method : cls.getDeclaredMethods()) {
                if (!method.getName().equals(name) || method.getParameterCount() != args.size()) {
                    continue;
                }
                Object[] values;
                try {
                    values = convertAll(method.getGenericParameterTypes(), args);
                } catch (IllegalArgumentException error) {
                    mismatch = error;
                    continue;
                }
                method.setAccessible(true);
                Object target = Modifier.isStatic(method.getModifiers()) ? null : newInstance(cls);
                return method.invoke(target, values);
            }
        }
        if (mismatch != null) {
            throw mismatch;
        }
        throw new NoSuchMethodException("no method " + entry + " taking " + args.size() + " argument(s)");
    }

    private static Object newInstance(Class<?> cls) throws ReflectiveOperationException {
        Constructor<?> constructor = cls.getDeclaredConstructor();
        constructor.setAccessible(true);
        return constructor.newInstance();
    }

    private static Object[] convertAll(Type[] types, List<?> args) {
        Object[] values = new Object[types.length];
        for (int k = 0; k < types.length; k++) {
            try {
                values[k] = ExecrlJson.convert(args.get(k), types[k], 0);
            } catch (IllegalArgumentException | ArithmeticException | ClassCastException error) {
                throw new IllegalArgumentException("argument " + (k + 1) + ": " + error.getMessage());
            }
        }
        return values;
    }

    private static String errorFields(Throwable error) {
        String type = error.getClass().getSimpleName();
        if (error instanceof OutOfMemoryError) {
            type = "MemoryError";  // judged like Python's MemoryError (verdicts.ERROR_VERDICTS)
        }
        StringBuilder trace = new StringBuilder(error.toString());
        StackTraceElement[] frames = error.getStackTrace();
        for (int k = 0; k < Math.min(frames.length, 11); k++) {
            trace.append("\n\tat ").append(frames[k]);
        }
        String message = String.valueOf(error.getMessage());
        message = message.length() > 2000 ? message.substring(0, 2000) : message;
        return "\"type\":" + ExecrlJson.quote(type) + ",\"message\":" + ExecrlJson.quote(message)
            + ",\"tb\":" + ExecrlJson.quote(trace.toString());
    }
}
