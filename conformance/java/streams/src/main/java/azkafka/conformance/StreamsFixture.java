package azkafka.conformance;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.Executors;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyQueryMetadata;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.InvalidStateStoreException;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.state.HostInfo;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;

/**
 * One instance of the iq conformance application (num.standby.replicas=1).
 * Its count stores cover the ways Kafka Streams picks a store's source topics:
 *
 * <pre>
 * counts     records per key of the input topic
 * rekeyed    records per "r-" + key of the input topic, through the 5-partition
 *            repartition topic "rekey"
 * joined     records per key of input-left (4 partitions) merged with input-right (8)
 * leftcount  records per key of input-left alone: the same subtopology as joined
 *            (they share the left source), but routed on input-left only
 * </pre>
 *
 * It serves, on its application.server port:
 *
 * <pre>
 * GET  /azkafka/iq/metadata             the iq metadata document (IqMetadataHandler)
 * GET  /store/{store}/{key}?stale=bool  the count of key; 503 {"error":"not_active"} when this
 *                                       instance cannot serve it (not active, or stale=false and
 *                                       only a standby, or rebalancing)
 * POST /keymeta/{store}                 body: keys, one per line; answer: one JSON object per
 *                                       line, KafkaStreams.queryMetadataForKey for each key
 * POST /where/{store}                   body: keys, one per line; answer: one JSON object per line,
 *                                       {"key", "partitions": [...]}: the local partitions of the
 *                                       store, active or standby, that hold the key
 * </pre>
 *
 * With group.protocol=streams the standby count is a group setting on the
 * broker: the fixture sets streams.num.standby.replicas=1 on its group.
 *
 * Arguments: bootstrap application-id port state-dir az input-topic [group-protocol].
 * The main consumer's client.rack is the az for zones ending in a or b; every
 * instance also sets client.tag.az.
 */
public final class StreamsFixture {
    static final String STORE = "counts";

    public static void main(String[] args) throws Exception {
        quietLogs();
        String bootstrap = args[0], appId = args[1], stateDir = args[3], az = args[4], input = args[5];
        int port = Integer.parseInt(args[2]);

        StreamsBuilder builder = new StreamsBuilder();
        Consumed<String, String> strings = Consumed.with(Serdes.String(), Serdes.String());
        KStream<String, String> in = builder.stream(input, strings);
        in.groupByKey().count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as(STORE));
        in.selectKey((k, v) -> "r-" + k)
            .repartition(Repartitioned.<String, String>as("rekey").withNumberOfPartitions(5)
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()))
            .groupByKey()
            .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("rekeyed"));
        KStream<String, String> left = builder.stream(input + "-left", strings);
        KStream<String, String> right = builder.stream(input + "-right", strings);
        left.merge(right).groupByKey()
            .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("joined"));
        left.groupByKey().count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("leftcount"));
        Topology topology = builder.build();

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.APPLICATION_SERVER_CONFIG, "127.0.0.1:" + port);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, 1);
        // merge() drops the sources' serdes; the stores after it use these.
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        // Fail over within seconds of a killed instance rather than 45s.
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 6000);
        p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);
        if (az.endsWith("a") || az.endsWith("b")) {
            p.put(StreamsConfig.mainConsumerPrefix("client.rack"), az);
        }
        p.put(StreamsConfig.clientTagPrefix("az"), az);
        if (args.length > 6) {
            p.put("group.protocol", args[6]);
        }

        KafkaStreams streams = new KafkaStreams(topology, p);
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        Admin admin = Admin.create(ap);
        if (args.length > 6 && args[6].equals("streams")) {
            ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, appId);
            admin.incrementalAlterConfigs(Map.of(group, List.of(new AlterConfigOp(
                new ConfigEntry("streams.num.standby.replicas", "1"), AlterConfigOp.OpType.SET)))).all().get();
        }

        // Without TCP_NODELAY the JDK server's separate header and body writes
        // meet delayed ACKs: about 40 ms per request on keep-alive connections.
        System.setProperty("sun.net.httpserver.nodelay", "true");
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 0);
        server.setExecutor(Executors.newFixedThreadPool(8));
        server.createContext("/azkafka/iq/metadata",
            new IqMetadataHandler(streams, topology, admin, appId, new HostInfo("127.0.0.1", port), az));
        server.createContext("/store/", ex -> serveValue(streams, port, ex));
        server.createContext("/keymeta/", ex -> serveKeyMetadata(streams, ex));
        server.createContext("/where/", ex -> serveWhere(streams, ex));
        server.start();

        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            server.stop(0);
            streams.close(Duration.ofSeconds(5));
            admin.close(Duration.ofSeconds(1));
        }));
        streams.start();
        System.out.println("READY " + port);
    }

    private static void quietLogs() {
        Logger root = Logger.getLogger("");
        root.setLevel(Level.WARNING);
        for (var h : root.getHandlers()) {
            h.setLevel(Level.WARNING);
        }
    }

    private static void serveValue(KafkaStreams streams, int port, HttpExchange ex) throws IOException {
        try {
            String[] parts = ex.getRequestURI().getRawPath().split("/", 4); // "", "store", store, key
            String store = parts[2];
            String key = URLDecoder.decode(parts[3], StandardCharsets.UTF_8);
            boolean stale = "stale=true".equals(ex.getRequestURI().getRawQuery());
            KeyQueryMetadata md = streams.queryMetadataForKey(store, key, new StringSerializer());
            boolean active = md != null && md.activeHost().port() == port;
            if (!active && !stale) {
                send(ex, 503, "{\"error\":\"not_active\"}");
                return;
            }
            StoreQueryParameters<ReadOnlyKeyValueStore<String, Long>> q =
                StoreQueryParameters.fromNameAndType(store, QueryableStoreTypes.<String, Long>keyValueStore())
                    .withPartition(md.partition());
            if (stale) {
                q = q.enableStaleStores();
            }
            Long v = streams.store(q).get(key);
            // The serving copy's lag, for stale reads only: allLocalStorePartitionLags
            // asks the broker for end offsets, too slow for every read.
            long lag = 0;
            if (stale) {
                Map<Integer, org.apache.kafka.streams.LagInfo> lags = streams.allLocalStorePartitionLags().get(store);
                lag = lags != null && lags.get(md.partition()) != null ? lags.get(md.partition()).offsetLag() : -1;
            }
            send(ex, 200, "{\"key\":" + IqMetadataHandler.quote(key) + ",\"value\":" + (v == null ? 0 : v)
                + ",\"found\":" + (v != null) + ",\"active\":" + active + ",\"partition\":" + md.partition()
                + ",\"lag\":" + lag + "}");
        } catch (InvalidStateStoreException e) {
            send(ex, 503, "{\"error\":\"not_active\",\"detail\":" + IqMetadataHandler.quote(String.valueOf(e.getMessage())) + "}");
        } catch (RuntimeException e) {
            send(ex, 500, "{\"error\":" + IqMetadataHandler.quote(e.toString()) + "}");
        }
    }

    private static void serveKeyMetadata(KafkaStreams streams, HttpExchange ex) throws IOException {
        String store = ex.getRequestURI().getRawPath().substring("/keymeta/".length());
        String body = new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
        StringBuilder out = new StringBuilder();
        for (String key : body.split("\n")) {
            if (key.isEmpty()) {
                continue;
            }
            KeyQueryMetadata md = streams.queryMetadataForKey(store, key, new StringSerializer());
            out.append("{\"key\":").append(IqMetadataHandler.quote(key));
            if (md == null) {
                out.append(",\"null\":true}\n");
                continue;
            }
            out.append(",\"partition\":").append(md.partition())
               .append(",\"active\":").append(IqMetadataHandler.quote(md.activeHost().host() + ":" + md.activeHost().port()))
               .append(",\"standbys\":[");
            TreeSet<String> sb = new TreeSet<>();
            md.standbyHosts().forEach(h -> sb.add(h.host() + ":" + h.port()));
            String sep = "";
            for (String s : sb) {
                out.append(sep).append(IqMetadataHandler.quote(s));
                sep = ",";
            }
            out.append("]}\n");
        }
        send(ex, 200, out.toString());
    }

    private static void serveWhere(KafkaStreams streams, HttpExchange ex) throws IOException {
        String store = ex.getRequestURI().getRawPath().substring("/where/".length());
        String body = new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
        Map<Integer, org.apache.kafka.streams.LagInfo> local = streams.allLocalStorePartitionLags().get(store);
        StringBuilder out = new StringBuilder();
        try {
            for (String key : body.split("\n")) {
                if (key.isEmpty()) {
                    continue;
                }
                out.append("{\"key\":").append(IqMetadataHandler.quote(key)).append(",\"partitions\":[");
                String sep = "";
                for (int partition : local == null ? Set.<Integer>of() : new TreeSet<>(local.keySet())) {
                    ReadOnlyKeyValueStore<String, Long> kv = streams.store(
                        StoreQueryParameters.fromNameAndType(store, QueryableStoreTypes.<String, Long>keyValueStore())
                            .withPartition(partition).enableStaleStores());
                    if (kv.get(key) != null) {
                        out.append(sep).append(partition);
                        sep = ",";
                    }
                }
                out.append("]}\n");
            }
        } catch (InvalidStateStoreException e) {
            send(ex, 503, "{\"error\":\"not_active\",\"detail\":" + IqMetadataHandler.quote(String.valueOf(e.getMessage())) + "}");
            return;
        }
        send(ex, 200, out.toString());
    }

    static void send(HttpExchange ex, int status, String body) throws IOException {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(status, b.length);
        try (OutputStream os = ex.getResponseBody()) {
            os.write(b);
        }
    }
}
