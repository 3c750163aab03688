import com.alibaba.com.caucho.hessian.io.java8.LocalDateTimeHandle;
import com.caucho.hessian.io.AbstractSerializerFactory;
import com.caucho.hessian.io.Deserializer;
import com.caucho.hessian.io.Hessian2Output;
import com.caucho.hessian.io.Serializer;
import com.caucho.hessian.io.SerializerFactory;
import com.caucho.hessian.io.StringValueSerializer;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.LocalDateTime;
import java.util.Arrays;
import java.util.HashSet;

/**
 * Prints, one line each as "name hex", the Hessian 2 bytes Java writes for
 * values whose types dubbo-go-hessian2 decodes natively: what a Java Dubbo
 * provider sends for them (java.time as Dubbo's hessian-lite writes it).
 */
public class HessianSamples {
    /**
     * Caucho's factory with what Dubbo's hessian-lite does differently for
     * these types: BigDecimal as an object with its string "value".
     */
    static final SerializerFactory FACTORY = new SerializerFactory();

    static {
        FACTORY.addFactory(new AbstractSerializerFactory() {
            @Override
            @SuppressWarnings("rawtypes")
            public Serializer getSerializer(Class cl) {
                return cl == BigDecimal.class ? new StringValueSerializer() : null;
            }

            @Override
            @SuppressWarnings("rawtypes")
            public Deserializer getDeserializer(Class cl) {
                return null;
            }
        });
    }

    static void print(String name, Object v) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        Hessian2Output out = new Hessian2Output(b);
        out.setSerializerFactory(FACTORY);
        out.writeObject(v);
        out.close();
        StringBuilder hex = new StringBuilder();
        for (byte x : b.toByteArray()) {
            hex.append(String.format("%02x", x & 0xff));
        }
        System.out.println(name + " " + hex);
    }

    public static void main(String[] args) throws IOException {
        print("LocalDateTime", new LocalDateTimeHandle(LocalDateTime.of(2026, 12, 2, 8, 30, 15, 123456789)));
        print("BigDecimal", new BigDecimal("12345678901234567890.0123456789"));
        print("BigInteger", new BigInteger("-98765432109876543210"));
        print("HashSet", new HashSet<>(Arrays.asList("a", "b", "c")));
        print("IllegalArgumentException", new IllegalArgumentException("amount must be positive"));
    }
}
