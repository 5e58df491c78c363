package iq

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/azkafka/azkafka/azdetect"
	"github.com/azkafka/azkafka/iq/internal/wire"
	"github.com/azkafka/azkafka/metrics"
)

// Environment variables read by NewClient (through WithLookupEnv's
// lookup, os.LookupEnv by default). Options passed to NewClient win over
// them; a variable that is set but blank is an error.
const (
	// EnvAllowStandby enables serving from standby replicas (and from an
	// active copy that is still restoring): "true" or "false", in any case.
	EnvAllowStandby = "AZKAFKA_IQ_ALLOW_STANDBY"
	// EnvMaxLag is the largest lag, in offsets, a replica may have to be
	// queried when standby serving is allowed: a non-negative integer.
	EnvMaxLag = "AZKAFKA_IQ_MAX_LAG"
)

// Defaults.
const (
	// DefaultMaxLag is the default MaxLag: 10,000 offsets.
	DefaultMaxLag = 10_000
	// DefaultMaxAttempts is the default number of replicas Query tries.
	DefaultMaxAttempts = 3
	// DefaultAttemptTimeout bounds one attempt of Query.
	DefaultAttemptTimeout = 2 * time.Second
)

// Source supplies the current routing metadata. Snapshot returns nil while
// no metadata is known. Implementations must be safe for concurrent use.
// *Snapshot (fixed metadata), *HTTPSource, *ClusterSource and
// *CombinedSource implement it.
type Source interface {
	Snapshot() *Snapshot
}

// WithAllowStandby turns serving from standby replicas, and from an active
// copy still restoring, on or off. Default: off, or EnvAllowStandby. Taken
// by NewClient.
func WithAllowStandby(allow bool) Option {
	return option{"WithAllowStandby", forClient, func(c *config) { c.allowStandby = &allow }}
}

// WithMaxLag sets the largest lag, in offsets, of a replica that may be
// queried when standby serving is allowed; it must not be negative.
// Default: DefaultMaxLag (10,000), or EnvMaxLag. Taken by NewClient.
func WithMaxLag(offsets int64) Option {
	return option{"WithMaxLag", forClient, func(c *config) { c.maxLag = &offsets }}
}

// WithAZ sets the caller's availability zone, used to prefer replicas in
// the same zone when standby serving is allowed. An empty zone means no
// preference. Default: the zone azdetect.Detect finds, asked once, on the
// first query that needs it, and only when standby serving is allowed.
// Taken by NewClient.
func WithAZ(az string) Option {
	return option{"WithAZ", forClient, func(c *config) { c.az = &az }}
}

// WithPartitioner sets the partitioner for keys, for applications whose
// Java code uses a custom StreamPartitioner. Default: Kafka's murmur2
// (Partition). Taken by NewClient.
func WithPartitioner(p Partitioner) Option {
	return option{"WithPartitioner", forClient, func(c *config) { c.partitioner = p }}
}

// WithRandom sets the source of randomness used to shuffle equally good
// replicas: intN(n) returns a number in [0, n). It must be safe for
// concurrent use. Default: math/rand/v2.IntN. Taken by NewClient.
func WithRandom(intN func(n int) int) Option {
	return option{"WithRandom", forClient, func(c *config) { c.intN = intN }}
}

// WithMaxAttempts bounds how many replicas Query tries for one key; it
// must be at least 1. Default: DefaultMaxAttempts (3). Taken by NewClient.
func WithMaxAttempts(n int) Option {
	return option{"WithMaxAttempts", forClient, func(c *config) { c.maxAttempts = n }}
}

// WithAttemptTimeout bounds each attempt of Query; the context passed to the
// query function carries it. Zero means no per-attempt bound. Default:
// DefaultAttemptTimeout (2s). Taken by NewClient.
func WithAttemptTimeout(d time.Duration) Option {
	return option{"WithAttemptTimeout", forClient, func(c *config) { c.attemptTimeout = d }}
}

// WithRetriable replaces the function that decides whether Query moves on
// to the next replica after an error. Default: IsRetriable. Taken by
// NewClient.
func WithRetriable(f func(error) bool) Option {
	return option{"WithRetriable", forClient, func(c *config) { c.retriable = f }}
}

// WithMetrics makes the Client report each Query to p (see package
// metrics: Recorder.Queried): its outcome, the copy that answered, the
// replicas tried and its duration. Default: none, at no cost. Taken by
// NewClient.
func WithMetrics(p metrics.Provider) Option {
	return option{"WithMetrics", forClient, func(c *config) { c.metrics = p }}
}

// Client routes interactive queries for one Kafka Streams application. It
// is safe for concurrent use.
type Client struct {
	src            Source
	allowStandby   bool
	maxLag         int64
	partitioner    Partitioner
	intN           func(int) int
	maxAttempts    int
	attemptTimeout time.Duration
	retriable      func(error) bool
	logger         *slog.Logger
	rec            metrics.Recorder // nil without WithMetrics

	azOnce          sync.Once
	az              string
	azDetect        func(context.Context) (azdetect.Result, error)
	azDetectTimeout time.Duration
}

// NewClient returns a Client that reads metadata from src. Settings come
// from opts, then from the environment (EnvAllowStandby, EnvMaxLag), then
// from the defaults. A malformed or blank environment variable is an error
// that names it and quotes its value; so is an option NewClient does not
// take.
func NewClient(src Source, opts ...Option) (*Client, error) {
	if src == nil {
		return nil, fmt.Errorf("iq: NewClient: nil Source")
	}
	cfg := newConfig()
	cfg.maxAttempts = DefaultMaxAttempts
	cfg.attemptTimeout = DefaultAttemptTimeout
	cfg.azDetect = azdetect.Detect
	cfg.azDetectTimeout = 2 * time.Second
	if err := cfg.apply(forClient, opts); err != nil {
		return nil, err
	}
	c := &Client{
		src:             src,
		maxLag:          DefaultMaxLag,
		partitioner:     cfg.partitioner,
		intN:            cfg.intN,
		maxAttempts:     cfg.maxAttempts,
		attemptTimeout:  cfg.attemptTimeout,
		retriable:       cfg.retriable,
		logger:          cfg.logger,
		azDetect:        cfg.azDetect,
		azDetectTimeout: cfg.azDetectTimeout,
	}
	if cfg.allowStandby != nil {
		c.allowStandby = *cfg.allowStandby
	} else if v, ok, err := cfg.env(EnvAllowStandby); err != nil {
		return nil, err
	} else if ok {
		switch strings.ToLower(v) {
		case "true":
			c.allowStandby = true
		case "false":
			c.allowStandby = false
		default:
			return nil, fmt.Errorf("iq: %s=%s: not a boolean (want true or false, in any case)", EnvAllowStandby, quote(v))
		}
	}
	if cfg.maxLag != nil {
		c.maxLag = *cfg.maxLag
	} else if v, ok, err := cfg.env(EnvMaxLag); err != nil {
		return nil, err
	} else if ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("iq: %s=%s: not a non-negative integer", EnvMaxLag, quote(v))
		}
		c.maxLag = n
	}
	if c.maxLag < 0 {
		return nil, fmt.Errorf("iq: WithMaxLag(%d): negative", c.maxLag)
	}
	if c.maxAttempts <= 0 {
		return nil, fmt.Errorf("iq: WithMaxAttempts(%d): must be at least 1", c.maxAttempts)
	}
	if c.attemptTimeout < 0 {
		return nil, fmt.Errorf("iq: WithAttemptTimeout(%s): negative", c.attemptTimeout)
	}
	if cfg.az != nil {
		c.az = *cfg.az
		c.azOnce.Do(func() {}) // never detect
	}
	if c.intN == nil {
		c.intN = rand.IntN
	}
	if c.retriable == nil {
		c.retriable = IsRetriable
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

// AllowStandby reports whether standby serving is on.
func (c *Client) AllowStandby() bool { return c.allowStandby }

// MaxLag returns the largest lag, in offsets, of a queried replica.
func (c *Client) MaxLag() int64 { return c.maxLag }

// Route returns where key lives in store (see Snapshot.Route), using the
// client's partitioner (WithPartitioner). It does not allocate unless it fails.
func (c *Client) Route(store string, key []byte) (Route, error) {
	return c.src.Snapshot().routeWith(store, key, c.partitioner)
}

// quote returns s quoted and truncated to 64 bytes, for error messages.
func quote(s string) string { return wire.Quote(s) }

// CallerAZ returns the caller's availability zone used to order replicas:
// the WithAZ value, else the zone detected (once) with azdetect; "" when
// unknown.
func (c *Client) CallerAZ(ctx context.Context) string { return c.callerAZ(ctx) }
