// Package iq routes Kafka Streams interactive queries from Go: it maps a key
// to its partition exactly as Java's Kafka Streams does (murmur2), finds the
// active and standby instances for that partition as
// KafkaStreams.queryMetadataForKey does, orders them by a policy that may
// allow fresh-enough standby replicas (KIP-535), preferring the caller's
// availability zone, and fails over between them.
//
// The shortest use reads the routing from the application's group on the
// Kafka cluster (no code on the Java side; both rebalance protocols) and
// queries a key, moving on to the next replica on retriable failures:
//
//	src, err := iq.NewClusterSource([]string{"kafka-0:9092"}, "orders-app") // brokers, application.id
//	if err != nil { ... }
//	src.Start()
//	defer src.Close()
//	client, err := iq.NewClient(src)
//	if err != nil { ... }
//	err = client.Query(ctx, "counts", []byte("alice"), func(ctx context.Context, r iq.Replica) error {
//		return getFromInstance(ctx, r.HostInfo.String(), "alice") // return iq.ErrNotActive if it says so
//	})
//
// Keys are routed in their serialized form: pass the bytes the Java
// application's key serde produces (see Partition for Kafka's built-in
// serializers). An application with a custom StreamPartitioner supplies
// the same logic with WithPartitioner. Client.Route returns what
// queryMetadataForKey returns, Client.Candidates the order Query tries,
// Client.Query the failover. Global stores and named topologies are not
// supported.
//
// Routing needs the metadata of the whole application; until it is known,
// or while no instance is active for a key's partition, Route and Query
// return errors that satisfy errors.Is(err, ErrNotAvailable). Query's error
// is a *QueryError listing each replica tried and why, e.g.
//
//	iq: query store "counts" key "k-1" partition 0 failed after 1 attempt(s): [active 10.0.0.2:7070: ... connection refused]
//
// # Sources
//
// A Source supplies the routing. NewClusterSource reads it from the
// application's consumer group on the brokers, with no code on the Java
// side; its standby lags are upper bounds (classic protocol) or unknown
// (streams protocol). NewHTTPSource polls the metadata endpoint the
// instances may serve (below), which gives measured lags.
// NewCombinedSource routes with one and takes lags (and zones the first
// lacks) from the other; NewStaticSource holds fixed metadata, for tests:
//
//	group, _ := iq.NewClusterSource(brokers, "orders-app")
//	endpoint, _ := iq.NewHTTPSource([]string{"http://streams-0:7070/azkafka/iq/metadata"})
//	src, _ := iq.NewCombinedSource(group, endpoint) // routing from the group, lags from the endpoint
//	src.Start()                                     // starts both
//	defer src.Close()                               // closes both
//	client, _ := iq.NewClient(src, iq.WithAllowStandby(true))
//
// Both polling sources poll every 5 s once started (WithPollInterval); a
// poll that fails is logged at warn level and the last good routing is
// kept. Query refreshes the source across a hand-over (every replica
// answered ErrNotActive).
//
// # Routing from the cluster
//
// A Kafka Streams application's group, named by its application.id, holds
// the whole routing table. With the classic protocol (group.protocol=classic,
// Kafka Streams' default) DescribeGroups returns, per member, the assignment
// (a consumer-protocol Assignment whose user data is Streams'
// AssignmentInfo: the member's tasks and the active and standby partitions
// of every instance) and, while the group is Stable, the member metadata (a
// Subscription with the member's client.rack and Streams' SubscriptionInfo:
// process ID, application.server, client tags, and the changelog offset
// sums of its tasks at join time). The cluster source polls that
// (DescribeGroups, Metadata for partition counts, ListOffsets for changelog
// end offsets) through kafka-go's protocol layer and builds the same model
// as the HTTP source. Versions 1 to 11 (Kafka Streams 4.3) of AssignmentInfo and
// SubscriptionInfo are decoded; a newer one is ErrUnsupportedVersion.
//
// Stores and their source topics: a store is found by its changelog topic,
// <application.id>-<store>-changelog, so stores without a changelog
// (logging disabled) are unknown to the group. The changelog has one
// partition per task of the store's subtopology, so the store belongs to the
// subtopology whose task count equals the changelog's partition count, if
// only one has it (among the subtopologies known to hold state, when that
// settles it); the subtopologies and their source topics come from pairing
// each member's assigned partitions with its active tasks. If all of that
// subtopology's source topics have the same partition count, any of them
// routes a key to the same partition and instances, and the store is routed
// on them. If not, the group cannot tell which of them feed the store (Java
// routes a store on the topics upstream of the processors connected to it):
// Route then fails with ErrStoreTopicsUnknown, whose message names the
// topics and the way out, WithStoreTopics, e.g.
//
//	iq: store "leftcount": subtopology 0 reads topics of different partition counts (left: 4, right: 8), and the group does not say which feed the store; name them with iq.WithStoreTopics("leftcount", topics...) or use the HTTP source: source topics of the store unknown
//
// Zones: an instance's zone is its members' client.rack (set
// main.consumer.client.rack), else the client tag named by WithAZTag or
// AZKAFKA_IQ_AZ_TAG (default "az", as in client.tag.az=us-east-1a), else
// unknown.
//
// Lags: the group does not carry lags. For each standby the source computes
// an upper bound: the end offsets of the task's changelogs (summed over
// every changelog with the task's partition count) minus the offset sum the
// instance reported when it joined. It is an upper bound as long as the
// standby keeps its state, since its position only moves forward; Lag.Bound
// marks it. Active copies have unknown lag.
//
// Bad input: a group that does not exist or is empty (ErrGroupNotFound), is
// rebalancing (ErrRebalancing: no member metadata until it is Stable), is not
// a Kafka Streams group (ErrNotStreamsGroup: protocol type not consumer or
// assignor not stream), has no topology yet (streams protocol), carries an
// unknown version or bytes that do not parse fails the poll with an error
// naming the group, the member and the field (with its byte offset), e.g.
//
//	iq: group "orders-app" member "...-StreamThread-1-consumer-..." : AssignmentInfo: field version: AssignmentInfo version 12, want 1..11
//
// Streams protocol: a group on the streams rebalance protocol (KIP-1071,
// group.protocol=streams) is invisible to DescribeGroups; when that finds no
// group the source sends StreamsGroupDescribe to the group's coordinator.
// kafka-go's protocol layer stops at API 51, so that one request goes over
// a connection of the source's own, made with the kafka.Transport's Dial,
// TLS and SASL settings (plain TCP for another RoundTripper). Each member is
// an instance: its application.server, rack, client tags, and active and
// standby tasks; the topology names each subtopology's source,
// repartition-source and changelog topics, so a store's subtopology comes
// straight from its changelog. A task's partitions are those of its
// subtopology's topics that exist: task 5 of a subtopology reading topics of
// 4 and 8 partitions holds partition 5 of the second only. Warm-up tasks are
// not queryable copies. The group carries no offsets on Kafka 4.3, so lags
// are unknown: combine with the HTTP source for standby reads. With this
// protocol the standby count is a group setting on the broker
// (streams.num.standby.replicas, default 0), not the client's
// num.standby.replicas.
//
// # The metadata endpoint
//
// Kafka Streams knows the assignment of every instance
// (metadataForAllStreamsClients) but each instance knows only its own lags
// (allLocalStorePartitionLags) and its own zone. So every instance serves
// one JSON document (version 1; unknown fields are ignored) with the
// metadata for all and its own lags and zone, and the HTTP source polls
// the seed URLs and, from the second poll on, every instance the metadata
// lists: polling one instance would leave every standby's lag unknown, and
// a standby of unknown lag is never chosen. The fields:
//
//   - version: 1.
//   - self: {"host", "port"}, the serving instance's application.server.
//   - az: the serving instance's availability zone; "" if unknown.
//   - state: KafkaStreams.state(), e.g. RUNNING, REBALANCING.
//   - stores: {store: [topic]}, each store's source topics (repartition
//     topics with the application.id- prefix).
//   - topics: {topic: count}, the partition count of each source topic.
//   - instances: [{"host", "port", "activeStores", "activePartitions":
//     {topic: [partition]}, "standbyStores", "standbyPartitions"}], what
//     metadataForAllStreamsClients() returns.
//   - lags: {store: {"<partition>": {"current", "end", "lag"}}}, the serving
//     instance's allLocalStorePartitionLags(), in offsets.
//
// For example:
//
//	{"version":1,"self":{"host":"10.0.0.1","port":7070},"az":"us-east-1a","state":"RUNNING",
//	 "stores":{"counts":["orders"]},"topics":{"orders":6},
//	 "instances":[{"host":"10.0.0.1","port":7070,"activeStores":["counts"],"activePartitions":{"orders":[0,3]},
//	               "standbyStores":["counts"],"standbyPartitions":{"orders":[1]}}],
//	 "lags":{"counts":{"0":{"current":812,"end":812,"lag":0},"1":{"current":790,"end":812,"lag":22}}}}
//
// A document that fails validation is an error naming its URL and the
// field, e.g.
//
//	http://10.0.0.1:7070/azkafka/iq/metadata: field topics["orders"]: partition count 0 out of range 1..65536
//
// The handler to copy into the Java application is
// conformance/java/streams/src/main/java/azkafka/conformance/IqMetadataHandler.java,
// the one the conformance suite runs against Kafka Streams 4.3.1: an
// HttpHandler for the JDK's com.sun.net.httpserver (its comment says how to
// register it). It gives each store the source topics Kafka Streams routes
// it on (the sources upstream of the processors that use the store), not
// every source of its subtopology: with left (4 partitions) merged with
// right (8) into a store joined, and left alone counted into leftcount, both
// stores share one subtopology, but leftcount is routed on left only, and
// giving it both topics would route about half of its keys to the wrong
// partition and instance.
//
// # Configuration
//
// NewClient, NewClusterSource and NewHTTPSource take one Option type; each
// option's doc says which constructors take it, and the others refuse it
// with an error naming it. WithLogger and WithLookupEnv are taken by all
// three. The environment is read through WithLookupEnv's lookup
// (os.LookupEnv by default): AZKAFKA_IQ_ALLOW_STANDBY (default false) and
// AZKAFKA_IQ_MAX_LAG (default 10000 offsets) by NewClient;
// AZKAFKA_IQ_AZ_TAG (default "az") and the SDK's AZKAFKA_MAX_RESPONSE_BYTES
// by NewClusterSource. Options win over the environment; a variable that
// is set but blank or malformed is an error naming it, also when an option
// overrides it, e.g. iq: AZKAFKA_IQ_MAX_LAG="abc": not a non-negative
// integer.
//
// # Errors
//
// Errors the package returns start with "iq:"; those of Route and
// Candidates then name the store. Callers can match these with errors.Is:
// ErrNotAvailable (no metadata yet, or no active instance for the key;
// ErrNoReplica, no replica the policy allows, is also ErrNotAvailable),
// ErrUnknownStore, ErrStoreTopicsUnknown, and, in the error of a cluster
// source's poll (Refresh, LastPoll), ErrGroupNotFound, ErrNotStreamsGroup,
// ErrRebalancing and ErrUnsupportedVersion. A query function returns ErrNotActive for a
// host that is not active for the key. With errors.As: *QueryError (every
// error of Query; errors.Is and errors.As see through it to each attempt's
// error) and *StatusError (an HTTP status a query function or an
// HTTP source's poll met). Configuration errors (those of the constructors)
// are not meant to be matched: they name the option or the variable and
// its value.
//
// # Metrics
//
// WithMetrics reports each Query (outcome, copy chosen, attempts, duration)
// to a metrics.Provider such as contrib/prometheus's.
package iq
