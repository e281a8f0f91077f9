// SecureClient runs Apache Kafka's Java clients against a secured listener, with the client
// settings (security.protocol, ssl.*, sasl.*) read from a properties file. Run it with the
// Java 11+ source launcher:
//
//   java -cp '<kafka libs>/*' SecureClient.java roundtrip PROPS TOPIC COUNT
//   java -cp '<kafka libs>/*' SecureClient.java authfail PROPS
//
// roundtrip creates TOPIC (3 partitions) with the Admin client, produces COUNT records (key
// k<i>, value v<i>, acks=all, idempotent), reads every partition back from the beginning
// and prints "OK <COUNT>" when it read each record exactly once with its value.
//
// authfail expects the broker to refuse the credentials: it asks the Admin client for the
// cluster's nodes and prints "AUTHFAIL <message>" when that fails with a
// SaslAuthenticationException; it exits 1 when the request succeeds or fails otherwise.

import java.io.FileInputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class SecureClient {
    public static void main(String[] args) {
        try {
            if (args.length == 4 && args[0].equals("roundtrip")) {
                roundtrip(load(args[1]), args[2], Integer.parseInt(args[3]));
            } else if (args.length == 2 && args[0].equals("authfail")) {
                authfail(load(args[1]));
            } else {
                System.err.println("usage: SecureClient roundtrip PROPS TOPIC COUNT");
                System.err.println("       SecureClient authfail PROPS");
                System.exit(2);
            }
        } catch (Exception e) {
            System.err.println("SecureClient failed:");
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    static Properties load(String path) throws Exception {
        Properties p = new Properties();
        try (FileInputStream in = new FileInputStream(path)) {
            p.load(in);
        }
        p.put("request.timeout.ms", "15000");
        p.put("default.api.timeout.ms", "30000");
        return p;
    }

    static void roundtrip(Properties base, String topic, int count) throws Exception {
        try (Admin admin = Admin.create(base)) {
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all().get();
        }

        Properties pp = new Properties();
        pp.putAll(base);
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
            for (int i = 0; i < count; i++) {
                p.send(new ProducerRecord<>(topic, "k" + i, "v" + i));
            }
            p.flush();
        }

        Properties cp = new Properties();
        cp.putAll(base);
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        Map<String, String> seen = new HashMap<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : c.partitionsFor(topic)) {
                tps.add(new TopicPartition(topic, pi.partition()));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 60_000;
            while (seen.size() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    String want = "v" + r.key().substring(1);
                    if (!want.equals(r.value())) {
                        throw new IllegalStateException("record " + r.key() + " at " + r.partition() + "@" + r.offset() + " has value " + r.value() + ", want " + want);
                    }
                    if (seen.put(r.key(), r.value()) != null) {
                        throw new IllegalStateException("record " + r.key() + " read twice, again at " + r.partition() + "@" + r.offset());
                    }
                }
            }
        }
        if (seen.size() != count) {
            throw new IllegalStateException("read " + seen.size() + " of " + count + " records");
        }
        System.out.println("OK " + seen.size());
    }

    static void authfail(Properties base) throws Exception {
        try (Admin admin = Admin.create(base)) {
            admin.describeCluster().nodes().get();
            System.err.println("describeCluster succeeded; want a SaslAuthenticationException");
            System.exit(1);
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof SaslAuthenticationException)) {
                throw e;
            }
            System.out.println("AUTHFAIL " + e.getCause().getMessage());
        }
    }
}
