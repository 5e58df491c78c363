import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Reads every partition of a topic from its beginning to its end with Kafka's
 * Java consumer and prints what it read.
 *
 * <p>Usage: {@code EosReader BOOTSTRAP TOPIC read_committed|read_uncommitted}.
 * The consumer has no group: it is assigned every partition of TOPIC, seeks to
 * their beginning and reads, with the isolation level given, until its
 * position reaches the end offset it listed first for every partition (under
 * read_committed the last stable offset: an open transaction ends the read
 * before it). It then prints one line per record, {@code <partition>\t<value>},
 * partition by partition in offset order, and exits 0; 1 when the read does not
 * end within 60 seconds.
 */
public final class EosReader {
    private static final Duration BUDGET = Duration.ofSeconds(60);

    private EosReader() {
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 3 || !(args[2].equals("read_committed") || args[2].equals("read_uncommitted"))) {
            System.err.println("usage: EosReader BOOTSTRAP TOPIC read_committed|read_uncommitted");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "azkafka-eosreader");
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, args[2]);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        long deadline = System.nanoTime() + BUDGET.toNanos();
        Map<Integer, List<String>> values = new HashMap<>();
        List<TopicPartition> parts = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            for (PartitionInfo p : consumer.partitionsFor(args[1], BUDGET)) {
                parts.add(new TopicPartition(p.topic(), p.partition()));
            }
            parts.sort(Comparator.comparingInt(TopicPartition::partition));
            consumer.assign(parts);
            consumer.seekToBeginning(parts);
            Map<TopicPartition, Long> end = consumer.endOffsets(parts, BUDGET);
            for (TopicPartition tp : parts) {
                values.put(tp.partition(), new ArrayList<>());
            }
            while (!reachedEnd(consumer, parts, end)) {
                if (System.nanoTime() > deadline) {
                    StringBuilder at = new StringBuilder();
                    for (TopicPartition tp : parts) {
                        at.append(String.format(" %d:%d/%d", tp.partition(), consumer.position(tp), end.get(tp)));
                    }
                    System.err.printf("EosReader: %s %s: not at the end offsets within %s (position/end:%s)%n",
                            args[1], args[2], BUDGET, at);
                    System.exit(1);
                }
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    if (r.offset() < end.get(new TopicPartition(r.topic(), r.partition()))) {
                        values.get(r.partition()).add(r.value() == null ? "" : r.value());
                    }
                }
            }
        }
        try (BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16)) {
            for (TopicPartition tp : parts) {
                for (String v : values.get(tp.partition())) {
                    out.write(Integer.toString(tp.partition()));
                    out.write('\t');
                    out.write(v);
                    out.write('\n');
                }
            }
        }
    }

    /** Reports whether the consumer's position reached end in every partition. */
    private static boolean reachedEnd(KafkaConsumer<?, ?> consumer, List<TopicPartition> parts, Map<TopicPartition, Long> end) {
        for (TopicPartition tp : parts) {
            if (consumer.position(tp) < end.get(tp)) {
                return false;
            }
        }
        return true;
    }
}
