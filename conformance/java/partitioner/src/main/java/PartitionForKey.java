import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;

import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;

/**
 * Prints the partition Kafka's Java producer picks for each key.
 *
 * <p>Usage: {@code PartitionForKey KEYS_FILE MAX_PARTITIONS}. KEYS_FILE holds one
 * hex-encoded key per line (an empty line is the empty key). For every key it
 * prints one line: {@code BuiltInPartitioner.partitionForKey(key, n)} for
 * n = 1..MAX_PARTITIONS, separated by spaces.
 */
public final class PartitionForKey {
    private PartitionForKey() {
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 2) {
            System.err.println("usage: PartitionForKey KEYS_FILE MAX_PARTITIONS");
            System.exit(2);
        }
        int max = Integer.parseInt(args[1]);
        HexFormat hex = HexFormat.of();
        try (BufferedReader in = Files.newBufferedReader(Path.of(args[0]), StandardCharsets.US_ASCII);
             BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.US_ASCII), 1 << 16)) {
            String line;
            while ((line = in.readLine()) != null) {
                byte[] key = hex.parseHex(line);
                for (int n = 1; n <= max; n++) {
                    if (n > 1) {
                        out.write(' ');
                    }
                    out.write(Integer.toString(BuiltInPartitioner.partitionForKey(key, n)));
                }
                out.write('\n');
            }
        }
    }
}
