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
// A store whose source topics the group cannot tell (a subtopology reading
// topics of different partition counts) is named with WithStoreTopics.
// Standby lags from the group are upper bounds (classic protocol) or
// unknown (streams protocol); the metadata endpoint the instances may serve
// (the JSON document described in the README, section iq; NewHTTPSource)
// gives measured lags, and NewCombinedSource routes with the group and
// takes lags from the endpoint.
//
// Keys are routed in their serialized form: pass the bytes the Java
// application's key serde produces (AppendStringKey, AppendInt32Key and
// AppendInt64Key match Kafka's built-in serializers). An application with a
// custom StreamPartitioner supplies the same logic with WithPartitioner.
//
// Routing needs the metadata of the whole application; until it is known,
// or while no instance is active for a key's partition, Route and Query
// return errors that satisfy errors.Is(err, ErrNotAvailable).
//
// WithMetrics reports each Query (outcome, copy chosen, attempts, duration)
// to a metrics.Provider such as contrib/prometheus's.
//
// Configuration: AZKAFKA_IQ_ALLOW_STANDBY (default false) and
// AZKAFKA_IQ_MAX_LAG (default 10000 offsets) for the Client,
// AZKAFKA_IQ_AZ_TAG (default "az") for the ClusterSource; options win.
package iq
