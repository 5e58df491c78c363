package iq

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/azdetect"
	"github.com/azkafka/azkafka/internal/settings"
	"github.com/azkafka/azkafka/metrics"
)

// Option configures NewClient, NewClusterSource or NewHTTPSource. Each
// option's documentation says which of them take it; the others refuse it
// with an error naming the option and the constructors that take it, e.g.
// "iq: NewHTTPSource: WithStoreTopics is an option of NewClusterSource
// only". Options are applied in order: a later one wins over an earlier
// one, and every option wins over the environment.
//
// Options have the shape of package sdk's: one interface per package, over
// internal/settings.Opt (a name, the constructors that take it, what it
// sets), so that a program passes one []Option to each constructor and a
// misplaced option is an error, not silently ignored.
type Option interface{ opt() settings.Opt[config] }

// constructor is a set of constructors an option applies to.
type constructor = settings.Ctors

const (
	forClient constructor = 1 << iota
	forCluster
	forHTTP

	forSources = forCluster | forHTTP
	forAll     = forClient | forSources
)

// constructorNames names the constructors, bit by bit, for errors.
var constructorNames = settings.Constructors{"NewClient", "NewClusterSource", "NewHTTPSource"}

// option is every Option: a name for errors, the constructors that take
// it and what it sets.
type option struct {
	name string
	to   constructor
	set  func(*config)
}

func (o option) opt() settings.Opt[config] {
	return settings.Opt[config]{Name: o.name, Takes: o.to, Set: func(c *config) error { o.set(c); return nil }}
}

// config holds what the environment and the options set, for every
// constructor; each constructor fills in its defaults first, then load
// applies its table of variables and the options, and it reads the fields
// it uses.
type config struct {
	// Every constructor.
	logger    *slog.Logger
	lookupEnv func(string) (string, bool)

	// NewClient.
	allowStandby    bool
	maxLag          int64
	az              *string
	partitioner     func(topic string, key []byte, numPartitions int) int
	intN            func(n int) int
	maxAttempts     int
	attemptTimeout  time.Duration
	azDetect        func(context.Context) (azdetect.Result, error)
	azDetectTimeout time.Duration
	metrics         metrics.Provider

	// NewClusterSource and NewHTTPSource.
	interval, timeout time.Duration

	// NewClusterSource.
	transport   kafka.RoundTripper
	storeTopics map[string][]string
	azTag       string
	maxResponse int // the frame guard's limit; 0: its default
	api         clusterAPI

	// NewHTTPSource.
	maxBody    int64
	httpClient *http.Client
	discover   bool
}

// newConfig returns the settings every constructor shares, at their
// defaults.
func newConfig() config {
	return config{logger: slog.Default(), lookupEnv: os.LookupEnv}
}

// load applies, for constructor to, the variables of table (read through
// WithLookupEnv's lookup, os.LookupEnv by default), then opts, which win.
// Every variable is validated, also one an option overrides.
func (c *config) load(to constructor, table []settings.Var[config], opts []Option) error {
	// The lookup is itself an option: find it first.
	probe := newConfig()
	if err := probe.apply(to, opts); err != nil {
		return err
	}
	c.lookupEnv = probe.lookupEnv
	if err := settings.Apply("iq", table, c, c.lookupEnv); err != nil {
		return err
	}
	return c.apply(to, opts)
}

// apply applies opts for constructor to.
func (c *config) apply(to constructor, opts []Option) error {
	list := make([]settings.Opt[config], len(opts))
	for i, o := range opts {
		if o == nil {
			return fmt.Errorf("iq: %s: option %d is nil", constructorNames.Of(to), i)
		}
		list[i] = o.opt()
	}
	if err := settings.ApplyOpts("iq", constructorNames, to, c, list); err != nil {
		return err
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if c.lookupEnv == nil {
		c.lookupEnv = os.LookupEnv
	}
	return nil
}

// WithLogger sets the logger. Default: slog.Default(). Taken by every
// constructor.
func WithLogger(l *slog.Logger) Option {
	return option{"WithLogger", forAll, func(c *config) { c.logger = l }}
}

// WithLookupEnv replaces os.LookupEnv as the source of the environment
// variables the constructors read (AZKAFKA_IQ_ALLOW_STANDBY and
// AZKAFKA_IQ_MAX_LAG for NewClient; AZKAFKA_IQ_AZ_TAG and
// AZKAFKA_MAX_RESPONSE_BYTES for NewClusterSource; none for
// NewHTTPSource): tests and programs that keep their settings elsewhere
// pass their own. A variable the lookup reports as set but blank (empty
// or spaces) is an error. Taken by every constructor.
func WithLookupEnv(lookup func(string) (string, bool)) Option {
	return option{"WithLookupEnv", forAll, func(c *config) { c.lookupEnv = lookup }}
}

// WithPollInterval sets the time between the polls Start begins. It must
// be positive. Default: 5s. Taken by NewClusterSource and NewHTTPSource.
func WithPollInterval(d time.Duration) Option {
	return option{"WithPollInterval", forSources, func(c *config) { c.interval = d }}
}

// WithPollTimeout bounds one poll: the request to one instance
// (NewHTTPSource) or the requests of one poll (NewClusterSource). It must be
// positive. Default: 2s for NewHTTPSource, 10s for NewClusterSource. Taken
// by both.
func WithPollTimeout(d time.Duration) Option {
	return option{"WithPollTimeout", forSources, func(c *config) { c.timeout = d }}
}
