// TxnProducer drives Apache Kafka's Java transactional producer through the cases of
// the e2e transaction tool tests. Run it with the Java 11+ source launcher:
//
//   java -cp '<kafka libs>/*' TxnProducer.java hang  BOOTSTRAP TRANSACTIONAL_ID TOPIC COUNT TIMEOUT_MS
//   java -cp '<kafka libs>/*' TxnProducer.java fence BOOTSTRAP TRANSACTIONAL_ID TOPIC
//
// hang begins a transaction with transaction.timeout.ms=TIMEOUT_MS, writes COUNT records
// (values TRANSACTIONAL_ID-0, -1, ...) to partition 0 of TOPIC, prints "OPEN" and leaves
// the transaction open. Each line "commit" on stdin then tries to commit it and prints
// "STEP commit OK" or "STEP commit ERR <exception classes, outermost first>".
//
// fence runs two producers with one transactional.id against partition 0 of TOPIC: the
// first writes "first-a" in a transaction, the second initializes (fencing the first),
// then the first tries to go on ("first-b", commit, abort, a new transaction with
// "first-c") and the second commits "second-a" and "second-b". Each try prints a STEP line
// as above; "SECOND INIT" and "SECOND COMMITTED" mark the second producer's progress.
//
// It exits 1 when a step that has to succeed fails.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnProducer {
    interface Step {
        void run() throws Exception;
    }

    public static void main(String[] args) {
        try {
            if (args.length == 6 && args[0].equals("hang")) {
                hang(args[1], args[2], args[3], Integer.parseInt(args[4]), args[5]);
            } else if (args.length == 4 && args[0].equals("fence")) {
                fence(args[1], args[2], args[3]);
            } else {
                System.err.println("usage: TxnProducer hang BOOTSTRAP TRANSACTIONAL_ID TOPIC COUNT TIMEOUT_MS");
                System.err.println("       TxnProducer fence BOOTSTRAP TRANSACTIONAL_ID TOPIC");
                System.exit(2);
            }
        } catch (Exception e) {
            System.err.println("TxnProducer failed:");
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    static KafkaProducer<String, String> producer(String bootstrap, String txnId, String timeoutMs) {
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        pp.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, timeoutMs);
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "20000");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(pp);
    }

    static void hang(String bootstrap, String txnId, String topic, int count, String timeoutMs) throws Exception {
        KafkaProducer<String, String> p = producer(bootstrap, txnId, timeoutMs);
        p.initTransactions();
        p.beginTransaction();
        for (int i = 0; i < count; i++) {
            p.send(new ProducerRecord<>(topic, 0, "k" + i, txnId + "-" + i)).get();
        }
        emit("OPEN");
        try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in))) {
            String line;
            while ((line = r.readLine()) != null) {
                if (line.trim().equals("commit")) {
                    step("commit", p::commitTransaction);
                }
            }
        }
    }

    static void fence(String bootstrap, String txnId, String topic) throws Exception {
        KafkaProducer<String, String> first = producer(bootstrap, txnId, "60000");
        first.initTransactions();
        first.beginTransaction();
        first.send(new ProducerRecord<>(topic, 0, "first", "first-a")).get();
        emit("FIRST SENT");

        KafkaProducer<String, String> second = producer(bootstrap, txnId, "60000");
        second.initTransactions();
        emit("SECOND INIT");

        step("first-send", () -> first.send(new ProducerRecord<>(topic, 0, "first", "first-b")).get());
        step("first-commit", first::commitTransaction);
        step("first-abort", first::abortTransaction);
        step("first-begin", first::beginTransaction);
        step("first-send-again", () -> first.send(new ProducerRecord<>(topic, 0, "first", "first-c")).get());
        first.close();

        second.beginTransaction();
        second.send(new ProducerRecord<>(topic, 0, "second", "second-a")).get();
        second.send(new ProducerRecord<>(topic, 0, "second", "second-b")).get();
        second.commitTransaction();
        emit("SECOND COMMITTED");
        second.close();
    }

    // step runs one try and prints its outcome with the classes of the exception's causes.
    static void step(String name, Step s) {
        try {
            s.run();
            emit("STEP " + name + " OK");
        } catch (Exception e) {
            StringBuilder chain = new StringBuilder();
            for (Throwable c = e; c != null; c = c.getCause()) {
                chain.append(' ').append(c.getClass().getSimpleName());
            }
            System.err.println("step " + name + ": " + e);
            emit("STEP " + name + " ERR" + chain);
        }
    }

    static void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
