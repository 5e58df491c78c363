// Package sdk makes segmentio/kafka-go clients zone-aware and resilient on
// multi-AZ Kafka-compatible clusters.
//
// It stamps the WarpStream client ID
//
//	[<user id>,]warpstream_session_id=<uuid>,warpstream_az=<az>,warpstream_interzone_lb=true
//
// wraps kafka.Writer and kafka.Reader so that the connection closes caused by
// interzone load balancing are retried instead of surfacing to the caller, and
// dials through a connection policy that limits and jitters reconnects.
//
// The change to an existing program is one constructor per client:
//
//	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: brokers, GroupID: "billing", Topic: "events"})
//	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "events", RequiredAcks: kafka.RequireAll})
//
// NewReader and NewWriter are what most programs want: the same API, on
// an engine with fetch from the own zone's replica (Reader) and idempotent
// produce (Writer). NewAZAwareDialer and NewTransport serve programs that
// keep kafka-go's own clients (kafka.Conn, kafka.Client, a kafka.Reader or
// kafka.Writer built by hand): they get the client ID and the connection
// policy, nothing more.
//
//	dialer, err := sdk.NewAZAwareDialer(&kafka.Dialer{Timeout: 10 * time.Second})
//	transport, err := sdk.NewTransport(nil)
//	c := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: transport}
//
// # Reader
//
// Reader keeps kafka.Reader's methods and kafka.ReaderConfig and runs on
// franz-go's consumer (kgo): fetch from the replica in the client's zone
// (WithFetchFromFollower), classic groups with the kafka-go balancers or
// KIP-848 (WithGroupProtocol), Close in milliseconds. See Reader.
//
// # Idempotent produce
//
// Writer keeps kafka.Writer's configuration and methods and runs on
// franz-go's producer (kgo) for every RequiredAcks. With kafka.RequireAll
// it produces idempotently by default (AZKAFKA_IDEMPOTENCE,
// WithIdempotence): a producer ID from the cluster, a sequence per
// partition, up to 5 requests in flight per broker, and a resend is the
// same batch, which the broker stores once. Each partition keeps the
// order messages were handed over in. A synchronous call never waits for
// BatchTimeout, and a message is resent until its delivery budget (110 s
// by default) is spent. See Writer for the exact guarantee and the cases
// that remain.
//
// # Zone affinity on Apache Kafka and MSK
//
// Where a broker's zone is its broker.rack, WithRackAwarePartitioning
// (AZKAFKA_RACK_AWARE_PARTITIONING) makes the Writer send keyless messages
// to partitions led in the client's AZ, the Reader fetches from the
// replica in its AZ (KIP-392), and ZoneAffinityGroupBalancer gives the
// members of a consumer group the partitions led in their zone (which
// matters where followers cannot serve).
//
// # Configuration
//
// Options (WithAZ, WithClientID, WithMaxConnRate, WithRetry, ...) win over
// the AZKAFKA_* environment variables (the Env* constants), which are all
// read in one place when a client is built. An invalid option or variable
// is an error naming it and quoting the value. The AZ is detected with
// azdetect (once per process) unless WithAZ or AZKAFKA_AZ gives it; an
// unknown AZ is not an error: the warpstream_az pair is left out and a
// warning is logged once per process.
//
// # Connection policy
//
// Each new connection takes a token from a rate limiter shared by every
// client of the process (DefaultMaxConnRate per second, bursts of
// DefaultMaxConnBurst); brokers limit connection creation too (KIP-612),
// and a client that ignores it gets its connections accepted and closed
// unanswered. A re-dial of an address whose last connection failed or
// closed before serving a request waits a full-jitter delay that doubles
// from 50ms up to 1s, reset once a connection to that address served a
// request; after the peer closes a healthy connection, the next dial waits
// a random 0-50ms so that clients dropped together do not return in
// lock-step. Waits respect the dial's context. DialerConnStats and
// TransportConnStats report the counters.
//
// # Metrics
//
// WithMetrics hands a client's events to a metrics.Provider: dials,
// closes by cause (the peer's: interzone load balancing), re-dials and
// limiter waits, requests and bytes per broker and rack, produced,
// failed and resent batches, producer epochs, consumed messages and lag,
// each partition's fetch source and the zone fallback. Exporters live in
// their own modules: contrib/prometheus and contrib/otel. Without it a
// client pays nothing. WithEngineHooks passes franz-go hooks (kprom) to
// the engine.
//
// # Misbehaving brokers
//
// Every connection a client of this package dials (Writer, Reader, and the
// kafka-go clients given NewAZAwareDialer or NewTransport) reads through a
// frame guard before any decoder: a response whose size prefix is
// negative, shorter than a correlation ID or above the limit
// (WithMaxResponseBytes, AZKAFKA_MAX_RESPONSE_BYTES, DefaultMaxResponseBytes)
// is refused before anything is allocated for it. For kafka-go's own
// clients, whose decoder trusts every count and length, the guard also
// reads each response whole, checks that its correlation ID is the one
// due and decodes it with franz-go's kmsg for its request's API key and
// version before kafka-go sees a byte; kmsg never takes a count or length
// beyond the bytes at hand, so a response claiming a million topics in 96
// bytes is refused, not allocated. TLS is done in the SDK's dial function
// so that the guard reads plaintext.
//
// A refusal closes the connection. The error matches ErrBadResponse and
// names the address and what was wrong, for instance
//
//	127.0.0.1:9093: not a Kafka broker: its reply begins "HTTP/1.1 400 Bad Request"
//	127.0.0.1:9093: a TLS record on a plaintext connection: the port speaks TLS; set TLS in the Dialer or Transport
//	127.0.0.1:9093: response of 2147483647 bytes exceeds the 104857600-byte limit (AZKAFKA_MAX_RESPONSE_BYTES)
//	127.0.0.1:9093: malformed Metadata v12 response (96 bytes): a length or count in it runs past its end
//	127.0.0.1:9093: a response with correlation ID 8 where 7 (Produce v9) was due: the connection is out of step
//
// A refused response is not retried as a transient error: the Writer
// fails the messages of that request with it, the Reader returns it from
// FetchMessage once its read attempts are spent. A TLS handshake the peer
// closes says to check for a plaintext listener.
package sdk
