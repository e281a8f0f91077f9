// WordCountEos is Kafka Streams' word count with processing.guarantee=exactly_once_v2,
// for the e2e transaction tests. Run it with the Java 11+ source launcher:
//
//   java -cp '<kafka libs>/*' WordCountEos.java BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR
//
// It splits each line of INPUT into words separated by spaces, counts each word in an
// in-memory store (restored from its changelog after a restart, so RocksDB is not used)
// and writes every new count to OUTPUT: the word as a string key, the count as an 8-byte
// big-endian long. It is a static member of its group, so that a restarted instance takes
// the place of a killed one at once; the producer's transaction.timeout.ms is 5 s, so a
// killed instance's open transaction (whose transactional.id a new instance does not
// reuse) is aborted by the coordinator soon.
//
// The line "hold" on stdin makes the stream thread stop for good at the second word of
// the next line, once the first word went to the repartition topic: a test kills the
// application there, with a transaction open that holds data. It prints, flushed at once,
// "STATE <state>" at each change of the Streams state (RUNNING once it processes),
// "HOLDING" when it stopped for a hold, and "CLOSED" after a clean close. It closes when
// stdin reaches end of file, and exits 1 when Streams fails.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;

public class WordCountEos {
    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: WordCountEos BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR");
            System.exit(2);
        }
        String bootstrap = args[0], appId = args[1], input = args[2], output = args[3], stateDir = args[4];

        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), appId + "-instance");
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 10000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        props.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), 5000);

        // Words travel as "<index in line>:<word>" up to the grouping, for the hold.
        AtomicBoolean hold = new AtomicBoolean();
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(WordCountEos::indexedWords)
            .peek((key, word) -> {
                if (hold.get() && !word.startsWith("0:")) {
                    emit("HOLDING");
                    blockForever();
                }
            })
            .groupBy((key, word) -> word.substring(word.indexOf(':') + 1), Grouped.with(Serdes.String(), Serdes.String()))
            .count(Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("word-counts"))
                .withKeySerde(Serdes.String())
                .withValueSerde(Serdes.Long()))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch failed = new CountDownLatch(1);
        streams.setStateListener((now, before) -> emit("STATE " + now));
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println("streams failed:");
            e.printStackTrace();
            failed.countDown();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Thread stdin = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in))) {
                String line;
                while ((line = r.readLine()) != null) {
                    if (line.trim().equals("hold")) {
                        hold.set(true);
                    }
                }
            } catch (Exception e) {
                System.err.println("stdin: " + e);
            }
            if (!streams.close(Duration.ofSeconds(60))) {
                System.err.println("streams did not close within 60s");
                System.exit(1);
            }
            emit("CLOSED");
            System.exit(0);
        });
        stdin.setDaemon(true);
        streams.start();
        stdin.start();
        failed.await();
        streams.close(Duration.ofSeconds(10));
        System.exit(1);
    }

    static List<String> indexedWords(String line) {
        List<String> out = new ArrayList<>();
        for (String w : line.split(" ")) {
            out.add(out.size() + ":" + w);
        }
        return out;
    }

    static void blockForever() {
        try {
            new CountDownLatch(1).await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("hold interrupted", e);
        }
    }

    static void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
