package iq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/azkafka/azkafka/azdetect"
	"github.com/azkafka/azkafka/internal/settings"
	"github.com/azkafka/azkafka/metrics"
)

// Defaults of NewClient.
const (
	defaultMaxLag         = 10_000
	defaultMaxAttempts    = 3
	defaultAttemptTimeout = 2 * time.Second
)

// clientVars is the table of NewClient's variables (see package
// internal/settings: the README's rows are generated from it, with
// clusterVars, by TestREADMEConfigTable, and each option's doc names its
// variable).
var clientVars = []settings.Var[config]{
	{Name: "AZKAFKA_IQ_ALLOW_STANDBY", Default: settings.Code(false), Option: "WithAllowStandby",
		Doc: "`iq.Client`: query standby replicas within the allowed lag, and an active copy still restoring. `iq.WithAllowStandby` wins.",
		Set: func(c *config, v string) (err error) {
			c.allowStandby, err = settings.ParseBool(v)
			return err
		}},
	{Name: "AZKAFKA_IQ_MAX_LAG", Default: settings.Code(defaultMaxLag), Option: "WithMaxLag",
		Doc: "`iq.Client`: the largest lag, in offsets, of a replica queried with standbys allowed. `iq.WithMaxLag` wins.",
		Set: func(c *config, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return errors.New("not a non-negative integer")
			}
			c.maxLag = n
			return nil
		}},
}

func init() {
	settings.Register("iq", clientVars, func() config { return config{} })
}

// WithAllowStandby turns serving from standby replicas, and from an active
// copy still restoring, on or off. Default: off, or
// AZKAFKA_IQ_ALLOW_STANDBY. Taken by NewClient.
func WithAllowStandby(allow bool) Option {
	return option{"WithAllowStandby", forClient, func(c *config) { c.allowStandby = allow }}
}

// WithMaxLag sets the largest lag, in offsets, of a replica that may be
// queried when standby serving is allowed; it must not be negative.
// Default: 10,000, or AZKAFKA_IQ_MAX_LAG. Taken by NewClient.
func WithMaxLag(offsets int64) Option {
	return option{"WithMaxLag", forClient, func(c *config) { c.maxLag = offsets }}
}

// WithAZ sets the caller's availability zone, used to prefer replicas in
// the same zone when standby serving is allowed. An empty zone means no
// preference. Default: the zone azdetect.Detect finds, asked once, on the
// first query that needs it, and only when standby serving is allowed.
// Taken by NewClient.
func WithAZ(az string) Option {
	return option{"WithAZ", forClient, func(c *config) { c.az = &az }}
}

// WithPartitioner sets the function that maps a serialized key to a
// partition of topic, which has numPartitions partitions, for an
// application whose Java code routes a store's source topic with a custom
// StreamPartitioner: supply the same logic here. It must return a
// partition in [0, numPartitions) and be safe for concurrent use.
// Default: Kafka's murmur2 (Partition). Taken by NewClient.
func WithPartitioner(partition func(topic string, key []byte, numPartitions int) int) Option {
	return option{"WithPartitioner", forClient, func(c *config) { c.partitioner = partition }}
}

// WithMaxAttempts bounds how many replicas Query tries for one key; it
// must be at least 1. Default: 3. Taken by NewClient.
func WithMaxAttempts(n int) Option {
	return option{"WithMaxAttempts", forClient, func(c *config) { c.maxAttempts = n }}
}

// WithAttemptTimeout bounds each attempt of Query; the context passed to the
// query function carries it. Zero means no per-attempt bound. Default: 2s.
// Taken by NewClient.
func WithAttemptTimeout(d time.Duration) Option {
	return option{"WithAttemptTimeout", forClient, func(c *config) { c.attemptTimeout = d }}
}

// WithMetrics makes the Client report each Query to p (see package
// metrics: Recorder.Queried): its outcome, the copy that answered, the
// replicas tried and its duration. Default: none, at no cost. Taken by
// NewClient.
func WithMetrics(p metrics.Provider) Option {
	return option{"WithMetrics", forClient, func(c *config) { c.metrics = p }}
}

// Client routes interactive queries for one Kafka Streams application: Route
// says where a key lives, Candidates which replicas the policy allows, and
// Query, the method most callers want, asks them in turn. It is safe for
// concurrent use.
type Client struct {
	src            *Source
	allowStandby   bool
	maxLag         int64
	partitioner    func(topic string, key []byte, numPartitions int) int
	intN           func(int) int
	maxAttempts    int
	attemptTimeout time.Duration
	logger         *slog.Logger
	rec            metrics.Recorder // nil without WithMetrics

	azOnce          sync.Once
	az              string
	azDetect        func(context.Context) (azdetect.Result, error)
	azDetectTimeout time.Duration
}

// NewClient returns a Client that routes with src's metadata. Settings come
// from opts, then from the environment (AZKAFKA_IQ_ALLOW_STANDBY,
// AZKAFKA_IQ_MAX_LAG), then from the defaults. A malformed or blank
// variable is an error that names it and quotes its value, also when an
// option overrides it; so is an option NewClient does not take.
func NewClient(src *Source, opts ...Option) (*Client, error) {
	if src == nil {
		return nil, fmt.Errorf("iq: NewClient: nil Source")
	}
	cfg := newConfig()
	cfg.maxLag = defaultMaxLag
	cfg.maxAttempts = defaultMaxAttempts
	cfg.attemptTimeout = defaultAttemptTimeout
	cfg.azDetect = azdetect.Detect
	cfg.azDetectTimeout = 2 * time.Second
	if err := cfg.load(forClient, clientVars, opts); err != nil {
		return nil, err
	}
	switch {
	case cfg.maxLag < 0:
		return nil, fmt.Errorf("iq: WithMaxLag(%d): negative", cfg.maxLag)
	case cfg.maxAttempts <= 0:
		return nil, fmt.Errorf("iq: WithMaxAttempts(%d): must be at least 1", cfg.maxAttempts)
	case cfg.attemptTimeout < 0:
		return nil, fmt.Errorf("iq: WithAttemptTimeout(%s): negative", cfg.attemptTimeout)
	}
	c := &Client{
		src:             src,
		allowStandby:    cfg.allowStandby,
		maxLag:          cfg.maxLag,
		partitioner:     cfg.partitioner,
		intN:            cfg.intN,
		maxAttempts:     cfg.maxAttempts,
		attemptTimeout:  cfg.attemptTimeout,
		logger:          cfg.logger,
		azDetect:        cfg.azDetect,
		azDetectTimeout: cfg.azDetectTimeout,
	}
	if cfg.az != nil {
		c.az = *cfg.az
		c.azOnce.Do(func() {}) // never detect
	}
	if c.intN == nil {
		c.intN = rand.IntN
	}
	if cfg.metrics != nil {
		mc := metrics.Client{Kind: metrics.KindIQ}
		if cfg.az != nil {
			mc.AZ, mc.AZSource = c.az, azdetect.SourceOption
		}
		c.rec = cfg.metrics.Recorder(mc)
	}
	return c, nil
}

// Route returns where key, serialized as the application's key serde does
// (see Partition), lives in store: what Java's
// KafkaStreams.queryMetadataForKey returns. The partition is computed
// against the store's source topic with the most partitions (the first on
// a tie) with the client's partitioner (WithPartitioner); the active copy
// is on the instance whose active partitions include that partition of
// any source topic of the store (when two claim it, the last in host, port
// order, as in Java), the standbys likewise, ordered by host then port.
// When no instance is active for the partition, the Route is still
// returned (partition and standbys filled, Active nil) with an error
// wrapping ErrNotAvailable; before the source has metadata the error also
// wraps ErrNotAvailable. Errors name the store and wrap an "iq:" error. It
// does not allocate unless it fails.
func (c *Client) Route(store string, key []byte) (Route, error) {
	return c.src.snapshot().route(store, key, c.partitioner)
}

// quote returns s quoted and truncated to 64 bytes, for error messages.
func quote(s string) string { return settings.Quote(s) }
