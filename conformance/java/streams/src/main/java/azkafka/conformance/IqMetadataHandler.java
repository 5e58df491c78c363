package azkafka.conformance;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.LagInfo;
import org.apache.kafka.streams.StreamsMetadata;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.state.HostInfo;
import org.apache.kafka.streams.TopologyDescription;

/**
 * Serves the azkafka iq metadata document (version 1, described in the iq package documentation)
 * for the JDK's com.sun.net.httpserver. To use it in an application, copy this file and change its
 * package. Register it on the application.server port:
 *
 * <pre>
 * System.setProperty("sun.net.httpserver.nodelay", "true"); // before creating the server
 * server.createContext("/azkafka/iq/metadata",
 *     new IqMetadataHandler(streams, topology, admin, appId, new HostInfo(host, port), az));
 * </pre>
 *
 * Without nodelay the JDK server's header and body writes meet delayed ACKs, and every request on
 * a keep-alive connection takes about 40 ms. Each store gets the source topics Kafka Streams routes
 * it on (the sources upstream of the processors that use it), found by walking the topology
 * description back from every processor that uses the store; Java takes the first processor
 * connected to a store, which differs only when later ones (joins) read co-partitioned topics, and
 * those route alike.
 */
public final class IqMetadataHandler implements HttpHandler {
    private final KafkaStreams streams;
    private final Map<String, Set<String>> storeTopics = new TreeMap<>();
    private final Admin admin;
    private final HostInfo self;
    private final String az;

    /** self is this instance's application.server; az its availability zone ("" if unknown). */
    public IqMetadataHandler(KafkaStreams streams, Topology topology, Admin admin, String appId,
                             HostInfo self, String az) {
        this.streams = streams;
        this.self = self;
        this.admin = admin;
        this.az = az;
        // A store's source topics are those Kafka Streams routes it on
        // (InternalTopologyBuilder): the topics of the source nodes upstream
        // of the processors connected to the store, not every source of its
        // subtopology. Repartition topics carry the application.id prefix.
        for (TopologyDescription.Subtopology st : topology.describe().subtopologies()) {
            for (TopologyDescription.Node n : st.nodes()) {
                if (n instanceof TopologyDescription.Processor p) {
                    Set<String> topics = sourceTopics(p, appId, new HashSet<>());
                    p.stores().forEach(s -> storeTopics.computeIfAbsent(s, k -> new TreeSet<>()).addAll(topics));
                }
            }
        }
    }

    /** The topics of the source nodes upstream of n. */
    private static Set<String> sourceTopics(TopologyDescription.Node n, String appId,
                                            Set<TopologyDescription.Node> seen) {
        Set<String> topics = new TreeSet<>();
        if (!seen.add(n)) {
            return topics;
        }
        if (n instanceof TopologyDescription.Source s && s.topicSet() != null) {
            s.topicSet().forEach(t -> topics.add(t.endsWith("-repartition") ? appId + "-" + t : t));
        }
        for (TopologyDescription.Node up : n.predecessors()) {
            topics.addAll(sourceTopics(up, appId, seen));
        }
        return topics;
    }

    @Override
    public void handle(HttpExchange ex) throws IOException {
        StringBuilder b = new StringBuilder();
        int status = 200;
        try {
            Set<String> all = new TreeSet<>();
            storeTopics.values().forEach(all::addAll);
            Map<String, Integer> counts = new TreeMap<>();
            admin.describeTopics(all).allTopicNames().get(2, TimeUnit.SECONDS)
                .forEach((t, d) -> counts.put(t, d.partitions().size()));
            b.append("{\"version\":1,\"self\":").append(host(self.host(), self.port()));
            b.append(",\"az\":").append(quote(az)).append(",\"state\":").append(quote(streams.state().name()));
            b.append(",\"stores\":{");
            String sep = "";
            for (var e : storeTopics.entrySet()) {
                b.append(sep).append(quote(e.getKey())).append(':').append(strings(e.getValue()));
                sep = ",";
            }
            b.append("},\"topics\":{");
            sep = "";
            for (var e : counts.entrySet()) {
                b.append(sep).append(quote(e.getKey())).append(':').append(e.getValue());
                sep = ",";
            }
            b.append("},\"instances\":[");
            sep = "";
            for (StreamsMetadata m : streams.metadataForAllStreamsClients()) {
                b.append(sep).append("{\"host\":").append(quote(m.host())).append(",\"port\":").append(m.port())
                 .append(",\"activeStores\":").append(strings(m.stateStoreNames()))
                 .append(",\"activePartitions\":").append(partitions(m.topicPartitions()))
                 .append(",\"standbyStores\":").append(strings(m.standbyStateStoreNames()))
                 .append(",\"standbyPartitions\":").append(partitions(m.standbyTopicPartitions())).append('}');
                sep = ",";
            }
            b.append("],\"lags\":{");
            sep = "";
            for (Map.Entry<String, Map<Integer, LagInfo>> e : streams.allLocalStorePartitionLags().entrySet()) {
                b.append(sep).append(quote(e.getKey())).append(":{");
                String sep2 = "";
                for (Map.Entry<Integer, LagInfo> l : e.getValue().entrySet()) {
                    LagInfo li = l.getValue();
                    b.append(sep2).append('"').append(l.getKey()).append("\":{\"current\":").append(li.currentOffsetPosition())
                     .append(",\"end\":").append(li.endOffsetPosition()).append(",\"lag\":").append(li.offsetLag()).append('}');
                    sep2 = ",";
                }
                b.append('}');
                sep = ",";
            }
            b.append("}}");
        } catch (Exception e) {
            status = 503;
            b.setLength(0);
            b.append("{\"error\":").append(quote(e.toString())).append('}');
        }
        byte[] body = b.toString().getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(status, body.length);
        try (OutputStream os = ex.getResponseBody()) {
            os.write(body);
        }
    }

    private static String host(String h, int p) {
        return "{\"host\":" + quote(h) + ",\"port\":" + p + "}";
    }

    private static String strings(Set<String> s) {
        StringBuilder b = new StringBuilder("[");
        String sep = "";
        for (String v : new TreeSet<>(s)) {
            b.append(sep).append(quote(v));
            sep = ",";
        }
        return b.append(']').toString();
    }

    private static String partitions(Set<TopicPartition> tps) {
        Map<String, Set<Integer>> m = new TreeMap<>();
        tps.forEach(tp -> m.computeIfAbsent(tp.topic(), k -> new TreeSet<>()).add(tp.partition()));
        StringBuilder b = new StringBuilder("{");
        String sep = "";
        for (var e : m.entrySet()) {
            b.append(sep).append(quote(e.getKey())).append(':').append(e.getValue().toString().replace(" ", ""));
            sep = ",";
        }
        return b.append('}').toString();
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
