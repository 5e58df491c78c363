package iq

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/azkafka/azkafka/azdetect"
	"github.com/azkafka/azkafka/metrics"
)

// Environment variables read by NewClient. Options passed to NewClient win
// over them.
const (
	// EnvAllowStandby enables serving from standby replicas (and from an
	// active copy that is still restoring): "true" or "false" (strconv.ParseBool).
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
// *Snapshot (fixed metadata) and *HTTPSource (polled) implement it.
type Source interface {
	Snapshot() *Snapshot
}

// Option configures a Client.
type Option func(*clientConfig)

type clientConfig struct {
	allowStandby    *bool
	maxLag          *int64
	az              *string
	azDetect        func(context.Context) (azdetect.Result, error)
	partitioner     Partitioner
	intN            func(n int) int
	maxAttempts     int
	attemptTimeout  time.Duration
	retriable       func(error) bool
	logger          *slog.Logger
	lookupEnv       func(string) (string, bool)
	azDetectTimeout time.Duration
	metrics         metrics.Provider
}

// WithAllowStandby turns serving from standby replicas, and from an active
// copy still restoring, on or off. Default: off, or EnvAllowStandby.
func WithAllowStandby(allow bool) Option {
	return func(c *clientConfig) { c.allowStandby = &allow }
}

// WithMaxLag sets the largest lag, in offsets, of a replica that may be
// queried when standby serving is allowed. Default: 10,000, or EnvMaxLag.
func WithMaxLag(offsets int64) Option {
	return func(c *clientConfig) { c.maxLag = &offsets }
}

// WithAZ sets the caller's availability zone, used to prefer replicas in
// the same zone when standby serving is allowed. An empty zone means no
// preference. Default: the zone azdetect.Detect finds, asked once, on the
// first query that needs it, and only when standby serving is allowed.
func WithAZ(az string) Option {
	return func(c *clientConfig) { c.az = &az }
}

// WithPartitioner sets the partitioner for keys, for applications whose
// Java code uses a custom StreamPartitioner. Default: Kafka's murmur2.
func WithPartitioner(p Partitioner) Option {
	return func(c *clientConfig) { c.partitioner = p }
}

// WithRandom sets the source of randomness used to shuffle equally good
// replicas: intN(n) returns a number in [0, n). It must be safe for
// concurrent use. Default: math/rand/v2.IntN.
func WithRandom(intN func(n int) int) Option {
	return func(c *clientConfig) { c.intN = intN }
}

// WithMaxAttempts bounds how many replicas Query tries for one key.
// Default: 3.
func WithMaxAttempts(n int) Option {
	return func(c *clientConfig) { c.maxAttempts = n }
}

// WithAttemptTimeout bounds each attempt of Query; the context passed to the
// query function carries it. Zero means no per-attempt bound. Default: 2s.
func WithAttemptTimeout(d time.Duration) Option {
	return func(c *clientConfig) { c.attemptTimeout = d }
}

// WithRetriable replaces the function that decides whether Query moves on
// to the next replica after an error. Default: IsRetriable.
func WithRetriable(f func(error) bool) Option {
	return func(c *clientConfig) { c.retriable = f }
}

// WithLogger sets the logger. Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(c *clientConfig) { c.logger = l }
}

// WithMetrics makes the Client report each Query to p (see package
// metrics: Recorder.Queried): its outcome, the copy that answered, the
// replicas tried and its duration. Default: none, at no cost.
func WithMetrics(p metrics.Provider) Option {
	return func(c *clientConfig) { c.metrics = p }
}

// WithLookupEnv replaces os.LookupEnv for reading EnvAllowStandby and
// EnvMaxLag (tests pass a map).
func WithLookupEnv(lookup func(string) (string, bool)) Option {
	return func(c *clientConfig) { c.lookupEnv = lookup }
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
// from the defaults. A malformed environment variable is an error that
// names it and quotes its value.
func NewClient(src Source, opts ...Option) (*Client, error) {
	if src == nil {
		return nil, fmt.Errorf("iq: NewClient: nil Source")
	}
	cfg := clientConfig{
		lookupEnv:       os.LookupEnv,
		maxAttempts:     DefaultMaxAttempts,
		attemptTimeout:  DefaultAttemptTimeout,
		azDetect:        azdetect.Detect,
		azDetectTimeout: 2 * time.Second,
	}
	for _, o := range opts {
		o(&cfg)
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
	} else if v, ok := cfg.lookupEnv(EnvAllowStandby); ok && strings.TrimSpace(v) != "" {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("iq: %s=%s: not a boolean (want true or false)", EnvAllowStandby, quote(v))
		}
		c.allowStandby = b
	}
	if cfg.maxLag != nil {
		c.maxLag = *cfg.maxLag
	} else if v, ok := cfg.lookupEnv(EnvMaxLag); ok && strings.TrimSpace(v) != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
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
	if c.logger == nil {
		c.logger = slog.Default()
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

// Route returns where key lives in store (see Snapshot.RouteWith), using
// the client's partitioner. It does not allocate unless it fails.
func (c *Client) Route(store string, key []byte) (Route, error) {
	return c.src.Snapshot().RouteWith(store, key, c.partitioner)
}

// quote returns s quoted and truncated to 64 bytes, for error messages.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}

// CallerAZ returns the caller's availability zone used to order replicas:
// the WithAZ value, else the zone detected (once) with azdetect; "" when
// unknown.
func (c *Client) CallerAZ(ctx context.Context) string { return c.callerAZ(ctx) }
