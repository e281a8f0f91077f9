// TxnEtl is an exactly-once consume-transform-produce application on Apache Kafka's
// Java clients, for the e2e transaction tests. Run it with the Java 11+ source launcher:
//
//   java -cp '<kafka libs>/*' TxnEtl.java BOOTSTRAP GROUP TRANSACTIONAL_ID INPUT OUTPUT
//
// A read_committed consumer in GROUP (a static member, so that a restarted instance
// takes the place of a killed one at once) reads INPUT. Each poll becomes one
// transaction of the producer with TRANSACTIONAL_ID: every record goes to OUTPUT with
// its key and the value "etl:" + value, and the consumed offsets are committed with
// sendOffsetsToTransaction and the consumer's group metadata. A failed transaction is
// aborted (when the producer cannot abort, it is replaced by a new one with the same
// transactional.id, which fences the old one) and the consumer rewinds to the committed
// offsets, so every input record is in OUTPUT once whatever fails.
//
// The line "hold" on stdin makes the next transaction stop after its records were
// written (producer.flush) and before its offsets and commit, until the line "release":
// a test kills the broker or the application there, with a transaction open that holds
// data. It prints one line per event on stdout, flushed at once:
//
//   READY                a producer is initialized (initTransactions returned)
//   HOLDING <n>          a transaction wrote n records and waits for "release"
//   COMMITTED <n>        a transaction of n records committed
//   ABORTED <exception>  a transaction failed and was aborted
//
// It exits 0 when stdin reaches end of file, and 1 when it cannot initialize a producer
// or after maxFailures transactions in a row failed.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnEtl {
    // maxFailures bounds failed transactions in a row: a broker that cannot do
    // transactions at all ends the run instead of keeping it retrying.
    static final int maxFailures = 30;
    // initAttempts bounds initTransactions calls that time out, as while the broker restarts.
    static final int initAttempts = 4;

    public static void main(String[] args) {
        if (args.length != 5) {
            System.err.println("usage: TxnEtl BOOTSTRAP GROUP TRANSACTIONAL_ID INPUT OUTPUT");
            System.exit(2);
        }
        try {
            run(args);
        } catch (Exception e) {
            System.err.println("TxnEtl failed:");
            e.printStackTrace();
            System.exit(1);
        }
    }

    static void run(String[] args) {
        String bootstrap = args[0], group = args[1], txnId = args[2], input = args[3], output = args[4];

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, txnId);
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "500");
        cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());

        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        // Longer than a broker restart, so that a transaction held open across one can commit.
        pp.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000");
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "45000");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());

        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp);
        AtomicBoolean stop = new AtomicBoolean();
        AtomicBoolean hold = new AtomicBoolean();
        Semaphore release = new Semaphore(0);
        Thread stdin = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in))) {
                String line;
                while ((line = r.readLine()) != null) {
                    switch (line.trim()) {
                        case "hold" -> hold.set(true);
                        case "release" -> release.release();
                        default -> System.err.println("stdin: unknown command " + line);
                    }
                }
            } catch (Exception e) {
                System.err.println("stdin: " + e);
            }
            stop.set(true);
            release.release();
            consumer.wakeup();
        });
        stdin.setDaemon(true);
        stdin.start();

        KafkaProducer<String, String> producer = newProducer(pp);
        consumer.subscribe(Collections.singletonList(input));
        int failures = 0;
        try {
            while (!stop.get()) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                try {
                    producer.beginTransaction();
                    for (ConsumerRecord<String, String> rec : records) {
                        producer.send(new ProducerRecord<>(output, rec.key(), "etl:" + rec.value()));
                    }
                    if (hold.getAndSet(false)) {
                        producer.flush();
                        emit("HOLDING " + records.count());
                        release.acquireUninterruptibly();
                    }
                    producer.sendOffsetsToTransaction(nextOffsets(records), consumer.groupMetadata());
                    producer.commitTransaction();
                    failures = 0;
                    emit("COMMITTED " + records.count());
                } catch (KafkaException e) {
                    if (++failures >= maxFailures) {
                        throw new IllegalStateException(failures + " transactions in a row failed", e);
                    }
                    System.err.println("transaction failed: " + e);
                    producer = abortOrReplace(producer, pp);
                    rewind(consumer);
                    emit("ABORTED " + e.getClass().getSimpleName());
                }
            }
        } catch (WakeupException e) {
            // stop requested
        }
        consumer.close();
        producer.close();
    }

    // newProducer makes a transactional producer and initializes it, which fences any
    // older producer of the transactional.id and aborts its open transaction.
    static KafkaProducer<String, String> newProducer(Properties pp) {
        for (int attempt = 1; ; attempt++) {
            KafkaProducer<String, String> producer = new KafkaProducer<>(pp);
            try {
                producer.initTransactions();
                emit("READY");
                return producer;
            } catch (TimeoutException e) {
                producer.close(Duration.ZERO);
                if (attempt == initAttempts) {
                    throw new IllegalStateException("initTransactions timed out " + attempt + " times", e);
                }
                System.err.println("initTransactions: " + e);
            }
        }
    }

    // abortOrReplace aborts the failed transaction; a producer that cannot abort (fenced,
    // or a commit whose outcome is unknown) is closed and replaced.
    static KafkaProducer<String, String> abortOrReplace(KafkaProducer<String, String> producer, Properties pp) {
        try {
            producer.abortTransaction();
            return producer;
        } catch (KafkaException e) {
            System.err.println("abort failed, replacing the producer: " + e);
            producer.close(Duration.ZERO);
            return newProducer(pp);
        }
    }

    // rewind moves the consumer back to the group's committed offsets (the outcome of
    // the failed transaction decides which), or to the start where none is committed.
    static void rewind(KafkaConsumer<String, String> consumer) {
        Set<TopicPartition> assigned = consumer.assignment();
        for (int attempt = 1; ; attempt++) {
            try {
                Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assigned, Duration.ofSeconds(30));
                for (TopicPartition tp : assigned) {
                    OffsetAndMetadata om = committed.get(tp);
                    if (om == null) {
                        consumer.seekToBeginning(Collections.singletonList(tp));
                    } else {
                        consumer.seek(tp, om);
                    }
                }
                return;
            } catch (TimeoutException e) {
                if (attempt == initAttempts) {
                    throw e;
                }
                System.err.println("committed offsets: " + e);
            }
        }
    }

    static Map<TopicPartition, OffsetAndMetadata> nextOffsets(ConsumerRecords<String, String> records) {
        Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
        for (TopicPartition tp : records.partitions()) {
            List<ConsumerRecord<String, String>> recs = records.records(tp);
            next.put(tp, new OffsetAndMetadata(recs.get(recs.size() - 1).offset() + 1));
        }
        return next;
    }

    static void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
