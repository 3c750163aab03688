import com.caucho.hessian.io.Hessian2Input;
import com.caucho.hessian.io.Hessian2Output;

import java.io.BufferedOutputStream;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.Closeable;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.reflect.Array;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.StringJoiner;
import java.util.TreeMap;

import org.weft.bench.User;

/**
 * A Java peer of the Dubbo protocol for weft's interop tests: Caucho Hessian
 * 4.0.38 (Debian's libhessian-java) reading and writing Dubbo 2.0.2 frames
 * exactly as Dubbo's ExchangeCodec, DubboCodec and DecodeableRpcInvocation
 * lay them out, without Dubbo itself (which the test machine does not have).
 *
 * <p>Frame: a 16-byte header (magic 0xdabb; flags: request 0x80, two-way 0x40,
 * event 0x20, low five bits the serialization id, 2 for hessian2; the status
 * byte, 20 for OK, in responses; the request id as a long; the body length
 * as an int), then the body: one Hessian2Output stream.
 *
 * <p>Request body: the Dubbo version "2.0.2", the service path, the service
 * version ("0.0.0": none), the method, the parameter descriptor
 * ("Ljava/lang/String;"), each argument, then the attachments map. A
 * generic call is the method $invoke with the descriptor of
 * GenericService.$invoke(String, String[], Object[]) and the attachment
 * generic=true; the types go as a String[] ("[string" list) and the arguments
 * as an Object[] ("[object" list), which is what Hessian writes for Java
 * arrays.
 *
 * <p>Response body (status OK): the result type as a Hessian int (Dubbo's
 * ObjectOutput.writeByte writes an int): 0 exception, 1 value, 2 null, each
 * plus 3 when attachments follow; then the value or the exception; then the
 * attachments map. Another status: the error message, a string.
 *
 * <pre>
 *   java DubboPeer provider 127.0.0.1:0   prints "listening HOST:PORT"; serves
 *                                          org.weft.bench.EchoService, plain
 *                                          and generic, as Java's GenericFilter
 *                                          serves $invoke
 *   java DubboPeer consumer HOST:PORT     calls it: one line per call,
 *                                          "name TAB result", the result
 *                                          described with its Java classes
 * </pre>
 */
public final class DubboPeer {
    static final short MAGIC = (short) 0xdabb;
    static final int FLAG_REQUEST = 0x80, FLAG_TWOWAY = 0x40, FLAG_EVENT = 0x20, HESSIAN2 = 2;
    static final byte OK = 20, SERVICE_ERROR = 70;
    static final int RESPONSE_WITH_EXCEPTION = 0, RESPONSE_VALUE = 1, RESPONSE_NULL_VALUE = 2, WITH_ATTACHMENTS = 3;
    static final String DUBBO_VERSION = "2.0.2";
    static final String SERVICE = "org.weft.bench.EchoService";
    static final String USER = "org.weft.bench.User";
    static final String GENERIC_DESC = "Ljava/lang/String;[Ljava/lang/String;[Ljava/lang/Object;";
    /** A heartbeat's body: Hessian null. */
    static final byte[] NULL_BODY = {'N'};
    static final int MAX_BODY = 8 << 20;

    public static void main(String[] args) throws Exception {
        if (args.length == 2 && args[0].equals("provider")) {
            provide(args[1]);
        } else if (args.length == 2 && args[0].equals("consumer")) {
            consume(args[1]);
        } else {
            System.err.println("usage: DubboPeer provider HOST:PORT | DubboPeer consumer HOST:PORT");
            System.exit(2);
        }
    }

    // ---- frames ----

    static final class Frame {
        int flag;
        byte status;
        long id;
        byte[] body;
    }

    static Frame readFrame(DataInputStream in) throws IOException {
        byte[] h = new byte[16];
        in.readFully(h);
        ByteBuffer b = ByteBuffer.wrap(h);
        short magic = b.getShort();
        if (magic != MAGIC) {
            throw new IOException(String.format("not a Dubbo frame: magic 0x%04x", magic & 0xffff));
        }
        Frame f = new Frame();
        f.flag = b.get() & 0xff;
        f.status = b.get();
        f.id = b.getLong();
        int len = b.getInt();
        if (len < 0 || len > MAX_BODY) {
            throw new IOException("body length " + len + " outside 0.." + MAX_BODY);
        }
        if ((f.flag & 0x1f) != HESSIAN2) {
            throw new IOException("serialization id " + (f.flag & 0x1f) + ", this peer reads hessian2 (2) only");
        }
        f.body = new byte[len];
        in.readFully(f.body);
        return f;
    }

    static void writeFrame(OutputStream out, int flag, byte status, long id, byte[] body) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(16 + body.length);
        b.putShort(MAGIC).put((byte) flag).put(status).putLong(id).putInt(body.length).put(body);
        synchronized (out) {
            out.write(b.array());
            out.flush();
        }
    }

    /** Answers a heartbeat request as Dubbo does: an event response with a null body. */
    static void answerEvent(OutputStream out, Frame f) throws IOException {
        if ((f.flag & FLAG_TWOWAY) != 0) {
            writeFrame(out, FLAG_EVENT | HESSIAN2, OK, f.id, NULL_BODY);
        }
    }

    // ---- consumer ----

    interface Call {
        Object call() throws Exception;
    }

    static final class Client implements Closeable {
        final Socket socket;
        final DataInputStream in;
        final OutputStream out;
        long nextId = 1;

        Client(String hostPort) throws IOException {
            int colon = hostPort.lastIndexOf(':');
            socket = new Socket(hostPort.substring(0, colon), Integer.parseInt(hostPort.substring(colon + 1)));
            socket.setSoTimeout(10_000);
            in = new DataInputStream(socket.getInputStream());
            out = new BufferedOutputStream(socket.getOutputStream());
        }

        /** Calls method (descriptor desc) and returns its value; an error response or an exception throws. */
        Object call(String method, String desc, Object[] args, boolean generic) throws IOException {
            ByteArrayOutputStream bos = new ByteArrayOutputStream();
            Hessian2Output h = new Hessian2Output(bos);
            h.writeString(DUBBO_VERSION);
            h.writeString(SERVICE);
            h.writeString("0.0.0");
            h.writeString(method);
            h.writeString(desc);
            for (Object a : args) {
                h.writeObject(a);
            }
            Map<String, Object> att = new HashMap<>();
            att.put("path", SERVICE);
            att.put("interface", SERVICE);
            att.put("version", "0.0.0");
            att.put("timeout", "5000");
            if (generic) {
                att.put("generic", "true");
            }
            h.writeObject(att);
            h.flush();
            long id = nextId++;
            writeFrame(out, FLAG_REQUEST | FLAG_TWOWAY | HESSIAN2, (byte) 0, id, bos.toByteArray());
            for (;;) {
                Frame f = readFrame(in);
                if ((f.flag & FLAG_EVENT) != 0) {
                    if ((f.flag & FLAG_REQUEST) != 0) {
                        answerEvent(out, f);
                    }
                    continue;
                }
                if ((f.flag & FLAG_REQUEST) != 0 || f.id != id) {
                    throw new IOException("unexpected frame: flag 0x" + Integer.toHexString(f.flag) + " id " + f.id + ", waiting for the response to " + id);
                }
                Hessian2Input r = new Hessian2Input(new ByteArrayInputStream(f.body));
                if (f.status != OK) {
                    throw new IOException("status " + f.status + ": " + r.readString());
                }
                int type = r.readInt();
                Object value = null;
                switch (type % WITH_ATTACHMENTS) {
                    case RESPONSE_VALUE:
                        value = r.readObject();
                        break;
                    case RESPONSE_NULL_VALUE:
                        break;
                    case RESPONSE_WITH_EXCEPTION:
                        throw new IOException("the provider raised " + describe(r.readObject()));
                }
                if (type >= WITH_ATTACHMENTS) {
                    Object resp = r.readObject();
                    if (!(resp instanceof Map)) {
                        throw new IOException("response attachments are " + describe(resp) + ", want a map");
                    }
                }
                return value;
            }
        }

        @Override
        public void close() throws IOException {
            socket.close();
        }
    }

    static void consume(String addr) throws Exception {
        try (Client c = new Client(addr)) {
            List<String> tags = new ArrayList<>(Arrays.asList("p", "q"));
            run("echo", () -> c.call("echo", "Ljava/lang/String;", new Object[] {"hello"}, false));
            run("getUser", () -> c.call("getUser", "J", new Object[] {7L}, false));
            run("echoUser", () -> c.call("echoUser", "Lorg/weft/bench/User;", new Object[] {new User(5, "ann", tags, 2.5)}, false));
            // As GenericService.$invoke sends them: String[] types, Object[] arguments.
            run("$invoke echo", () -> c.call("$invoke", GENERIC_DESC,
                    new Object[] {"echo", new String[] {"java.lang.String"}, new Object[] {"hi"}}, true));
            run("$invoke getUser", () -> c.call("$invoke", GENERIC_DESC,
                    new Object[] {"getUser", new String[] {"long"}, new Object[] {7L}}, true));
            Map<String, Object> pojo = new HashMap<>();
            pojo.put("class", USER);
            pojo.put("id", 5L);
            pojo.put("name", "ann");
            pojo.put("tags", tags);
            pojo.put("score", 2.5);
            run("$invoke echoUser", () -> c.call("$invoke", GENERIC_DESC,
                    new Object[] {"echoUser", new String[] {USER}, new Object[] {pojo}}, true));
        }
    }

    static void run(String name, Call call) {
        String line;
        try {
            line = describe(call.call());
        } catch (Exception e) {
            line = "ERROR " + e;
        }
        System.out.println(name + "\t" + line);
        System.out.flush();
    }

    /** A value with its Java classes, for the test to compare: String(x), ArrayList[...], HashMap{k=...}, User{...}. */
    static String describe(Object o) {
        if (o == null) {
            return "null";
        }
        if (o instanceof User) {
            User u = (User) o;
            return "User{id=" + u.id + ", name=" + u.name + ", tags=" + describe(u.tags) + ", score=" + u.score + "}";
        }
        if (o instanceof Map) {
            StringJoiner j = new StringJoiner(", ", o.getClass().getSimpleName() + "{", "}");
            TreeMap<String, Object> sorted = new TreeMap<>();
            for (Map.Entry<?, ?> e : ((Map<?, ?>) o).entrySet()) {
                sorted.put(String.valueOf(e.getKey()), e.getValue());
            }
            sorted.forEach((k, v) -> j.add(k + "=" + describe(v)));
            return j.toString();
        }
        if (o instanceof Collection) {
            StringJoiner j = new StringJoiner(", ", o.getClass().getSimpleName() + "[", "]");
            for (Object e : (Collection<?>) o) {
                j.add(describe(e));
            }
            return j.toString();
        }
        if (o.getClass().isArray()) {
            StringJoiner j = new StringJoiner(", ", o.getClass().getSimpleName() + "[", "]");
            for (int i = 0; i < Array.getLength(o); i++) {
                j.add(describe(Array.get(o, i)));
            }
            return j.toString();
        }
        if (o instanceof Throwable) {
            return o.getClass().getName() + "(" + ((Throwable) o).getMessage() + ")";
        }
        return o.getClass().getSimpleName() + "(" + o + ")";
    }

    // ---- provider ----

    static void provide(String addr) throws IOException {
        int colon = addr.lastIndexOf(':');
        String host = addr.substring(0, colon);
        ServerSocket server = new ServerSocket();
        server.bind(new InetSocketAddress(InetAddress.getByName(host), Integer.parseInt(addr.substring(colon + 1))));
        System.out.println("listening " + host + ":" + server.getLocalPort());
        System.out.flush();
        for (;;) {
            Socket s = server.accept();
            Thread t = new Thread(() -> serve(s));
            t.setDaemon(true);
            t.start();
        }
    }

    static void serve(Socket s) {
        try (Socket socket = s) {
            DataInputStream in = new DataInputStream(socket.getInputStream());
            OutputStream out = new BufferedOutputStream(socket.getOutputStream());
            for (;;) {
                Frame f;
                try {
                    f = readFrame(in);
                } catch (EOFException e) {
                    return;
                }
                if ((f.flag & FLAG_REQUEST) == 0) {
                    continue; // a response to nothing this side sent
                }
                if ((f.flag & FLAG_EVENT) != 0) {
                    answerEvent(out, f);
                    continue;
                }
                byte status = OK;
                byte[] reply;
                try {
                    reply = handle(f.body);
                } catch (Exception e) {
                    // Dubbo answers what it cannot serve with an error status and the message.
                    status = SERVICE_ERROR;
                    ByteArrayOutputStream bos = new ByteArrayOutputStream();
                    Hessian2Output h = new Hessian2Output(bos);
                    h.writeString("DubboPeer: " + e);
                    h.flush();
                    reply = bos.toByteArray();
                }
                if ((f.flag & FLAG_TWOWAY) != 0) {
                    writeFrame(out, HESSIAN2, status, f.id, reply);
                }
            }
        } catch (IOException e) {
            System.err.println("DubboPeer: connection: " + e);
        }
    }

    /** The methods of EchoService, by name: their parameter descriptors. */
    static final Map<String, String> DESCS = Map.of(
            "echo", "Ljava/lang/String;",
            "getUser", "J",
            "echoUser", "Lorg/weft/bench/User;");
    /** The same, as GenericService callers name the types. */
    static final Map<String, List<String>> TYPES = Map.of(
            "echo", List.of("java.lang.String"),
            "getUser", List.of("long"),
            "echoUser", List.of(USER));

    /** Decodes a request as DecodeableRpcInvocation does (each argument read as its declared class) and answers it. */
    static byte[] handle(byte[] body) throws Exception {
        Hessian2Input in = new Hessian2Input(new ByteArrayInputStream(body));
        String dubboVersion = in.readString();
        String path = in.readString();
        in.readString(); // the service version
        String method = in.readString();
        String desc = in.readString();
        if (!SERVICE.equals(path)) {
            throw new IllegalArgumentException("no service " + path + " (Dubbo " + dubboVersion + "); this provider has " + SERVICE);
        }
        Class<?>[] pts = desc2classes(desc);
        Object[] args = new Object[pts.length];
        for (int i = 0; i < pts.length; i++) {
            args[i] = in.readObject(pts[i]);
        }
        Object att = in.readObject();
        if (!(att instanceof Map)) {
            throw new IllegalArgumentException("attachments are " + describe(att) + ", want a map");
        }
        Object result;
        if (method.equals("$invoke") && desc.equals(GENERIC_DESC)) {
            // What the consumer sent, as Java sees it without the signature's help.
            System.out.println("seen $invoke " + args[0] + " " + wireClasses(body) + " generic=" + ((Map<?, ?>) att).get("generic"));
            System.out.flush();
            result = invokeGeneric((String) args[0], (String[]) args[1], (Object[]) args[2]);
        } else {
            if (!desc.equals(DESCS.get(method))) {
                throw new NoSuchMethodException(SERVICE + "." + method + "(" + desc + ")");
            }
            result = invoke(method, args);
        }
        ByteArrayOutputStream bos = new ByteArrayOutputStream();
        Hessian2Output h = new Hessian2Output(bos);
        Map<String, Object> resp = new HashMap<>();
        resp.put("dubbo", DUBBO_VERSION);
        if (result == null) {
            h.writeInt(RESPONSE_NULL_VALUE + WITH_ATTACHMENTS);
        } else {
            h.writeInt(RESPONSE_VALUE + WITH_ATTACHMENTS);
            h.writeObject(result);
        }
        h.writeObject(resp);
        h.flush();
        return bos.toByteArray();
    }

    /** The Java classes $invoke's types and arguments decode to when read as plain Objects. */
    static String wireClasses(byte[] body) throws IOException {
        Hessian2Input in = new Hessian2Input(new ByteArrayInputStream(body));
        for (int i = 0; i < 5; i++) {
            in.readString();
        }
        in.readObject(); // the method name
        Object types = in.readObject();
        Object args = in.readObject();
        return "types=" + (types == null ? "null" : types.getClass().getName())
                + " args=" + (args == null ? "null" : args.getClass().getName());
    }

    static Object invoke(String method, Object[] args) {
        switch (method) {
            case "echo":
                return (String) args[0];
            case "getUser":
                long id = (Long) args[0];
                return new User(id, "user-" + id, new ArrayList<>(Arrays.asList("a", "b", "c")), id * 1.5);
            case "echoUser":
                User u = (User) args[0];
                return new User(u.id, u.name + "!", u.tags, u.score);
        }
        throw new IllegalArgumentException("no method " + method);
    }

    /**
     * Java's GenericFilter in small: finds the method by name and type names,
     * realizes the arguments (a map with "class" becomes the POJO, as
     * PojoUtils.realize makes it), calls it, and generalizes the result (a POJO
     * becomes a HashMap with "class"; a List stays an ArrayList).
     */
    static Object invokeGeneric(String method, String[] types, Object[] args) {
        List<String> want = TYPES.get(method);
        if (want == null || !want.equals(Arrays.asList(types)) || args.length != types.length) {
            throw new IllegalArgumentException("no method " + method + Arrays.toString(types) + " for " + args.length + " arguments");
        }
        Object[] real = new Object[args.length];
        for (int i = 0; i < args.length; i++) {
            real[i] = realize(args[i], types[i]);
        }
        return generalize(invoke(method, real));
    }

    static Object realize(Object arg, String type) {
        switch (type) {
            case "long":
                return ((Number) arg).longValue();
            case "java.lang.String":
                return (String) arg;
            case USER: {
                if (arg instanceof User) {
                    return arg;
                }
                Map<?, ?> m = (Map<?, ?>) arg;
                Object cls = m.get("class");
                if (cls != null && !USER.equals(cls)) {
                    throw new IllegalArgumentException("argument of class " + cls + ", want " + USER);
                }
                List<String> tags = new ArrayList<>();
                Object t = m.get("tags");
                if (t instanceof Collection) {
                    for (Object e : (Collection<?>) t) {
                        tags.add((String) e);
                    }
                } else if (t != null && t.getClass().isArray()) {
                    for (int i = 0; i < Array.getLength(t); i++) {
                        tags.add((String) Array.get(t, i));
                    }
                }
                Number id = (Number) m.get("id"), score = (Number) m.get("score");
                return new User(id == null ? 0 : id.longValue(), (String) m.get("name"), tags, score == null ? 0 : score.doubleValue());
            }
        }
        throw new IllegalArgumentException("cannot realize type " + type);
    }

    static Object generalize(Object v) {
        if (!(v instanceof User)) {
            return v;
        }
        User u = (User) v;
        Map<String, Object> m = new HashMap<>();
        m.put("class", USER);
        m.put("id", u.id);
        m.put("name", u.name);
        m.put("tags", u.tags == null ? null : new ArrayList<>(u.tags));
        m.put("score", u.score);
        return m;
    }

    /** Parameter descriptor to classes, as ReflectUtils.desc2classArray does. */
    static Class<?>[] desc2classes(String desc) throws ClassNotFoundException {
        List<Class<?>> out = new ArrayList<>();
        for (int i = 0; i < desc.length(); ) {
            int start = i;
            while (desc.charAt(i) == '[') {
                i++;
            }
            int end = desc.charAt(i) == 'L' ? desc.indexOf(';', i) + 1 : i + 1;
            if (end <= i) {
                throw new ClassNotFoundException("bad descriptor " + desc);
            }
            out.add(descClass(desc.substring(start, end)));
            i = end;
        }
        return out.toArray(new Class<?>[0]);
    }

    static Class<?> descClass(String d) throws ClassNotFoundException {
        switch (d) {
            case "Z": return boolean.class;
            case "B": return byte.class;
            case "C": return char.class;
            case "S": return short.class;
            case "I": return int.class;
            case "J": return long.class;
            case "F": return float.class;
            case "D": return double.class;
        }
        if (d.startsWith("[")) {
            return Class.forName(d.replace('/', '.'));
        }
        return Class.forName(d.substring(1, d.length() - 1).replace('/', '.'));
    }
}
