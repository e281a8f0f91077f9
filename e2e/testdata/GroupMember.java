// GroupMember is one Apache Kafka Java consumer in a consumer group, for the
// e2e group tests. Run it with the Java 11+ source launcher:
//
//   java -cp '<kafka libs>/*' GroupMember.java BOOTSTRAP GROUP TOPIC PROTOCOL NAME
//
// PROTOCOL is "classic" or "consumer" (group.protocol). It prints one line per
// event on stdout, flushed at once, for the Go test to parse:
//
//   OWNED <name> <generation> <p,p,...>   the complete assignment after a change ("-" when empty)
//   REC <name> <partition> <offset>       a record consumed (offsets are committed after each poll)
//   COMMITTED <name> <count>              a synchronous commit succeeded
//   CLOSED <name>                         the consumer closed cleanly
//
// It stops when stdin reaches end of file or reads "stop": it commits and closes
// (leaving the group). Killing the process instead simulates a crash.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class GroupMember {
    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: GroupMember BOOTSTRAP GROUP TOPIC PROTOCOL NAME");
            System.exit(2);
        }
        String bootstrap = args[0], group = args[1], topic = args[2], protocol = args[3], name = args[4];
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "100");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        if (protocol.equals("classic")) {
            // The session timeout of the classic protocol is the client's; the
            // consumer protocol's is the broker's group.consumer.session.timeout.ms.
            props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
            props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        }

        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
        AtomicBoolean stop = new AtomicBoolean();
        Thread stdin = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in))) {
                String line;
                while ((line = r.readLine()) != null && !line.trim().equals("stop")) {
                }
            } catch (Exception e) {
                System.err.println("stdin: " + e);
            }
            stop.set(true);
            consumer.wakeup();
        });
        stdin.setDaemon(true);
        stdin.start();

        consumer.subscribe(Collections.singletonList(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                if (!partitions.isEmpty()) {
                    try {
                        consumer.commitSync();
                    } catch (Exception e) {
                        // A member that lost its generation cannot commit; the next
                        // owner re-reads from the last commit (at-least-once).
                        System.err.println("commit on revoke: " + e);
                    }
                }
                owned(consumer, name, partitions, true);
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                owned(consumer, name, partitions, false);
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                owned(consumer, name, partitions, true);
            }
        });
        try {
            while (!stop.get()) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                StringBuilder out = new StringBuilder();
                for (ConsumerRecord<byte[], byte[]> rec : records) {
                    out.append("REC ").append(name).append(' ').append(rec.partition()).append(' ').append(rec.offset()).append('\n');
                }
                if (!records.isEmpty()) {
                    System.out.print(out);
                    try {
                        consumer.commitSync();
                        System.out.println("COMMITTED " + name + " " + records.count());
                    } catch (Exception e) {
                        System.err.println("commit: " + e);
                    }
                    System.out.flush();
                }
            }
        } catch (WakeupException e) {
            // stop requested
        }
        consumer.close();
        System.out.println("CLOSED " + name);
        System.out.flush();
    }

    // owned prints the member's whole assignment after a change; partitions are
    // the ones added (or, when removed is set, taken away).
    static void owned(KafkaConsumer<byte[], byte[]> consumer, String name, Collection<TopicPartition> changed, boolean removed) {
        List<Integer> ps = new ArrayList<>();
        for (TopicPartition tp : consumer.assignment()) {
            if (!(removed && changed.contains(tp))) {
                ps.add(tp.partition());
            }
        }
        Collections.sort(ps);
        StringBuilder sb = new StringBuilder();
        for (int p : ps) {
            if (sb.length() > 0) {
                sb.append(',');
            }
            sb.append(p);
        }
        int generation = consumer.groupMetadata().generationId();
        System.out.println("OWNED " + name + " " + generation + " " + (sb.length() == 0 ? "-" : sb.toString()));
        System.out.flush();
    }
}
