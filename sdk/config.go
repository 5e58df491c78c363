package sdk

// config.go holds the package's settings: the AZKAFKA_* variables (the
// table envVars, from which the README's rows are generated), the options
// that win over them, and loadConfig, which resolves both and the AZ into
// one config per client. It pairs with session.go, which turns a config
// into a client's session.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/azkafka/azkafka/azdetect"
	"github.com/azkafka/azkafka/internal/envcheck"
	"github.com/azkafka/azkafka/internal/frameguard"
	"github.com/azkafka/azkafka/internal/settings"
	"github.com/azkafka/azkafka/metrics"
	"github.com/azkafka/azkafka/retry"
	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/time/rate"
)

// Environment variables read by the SDK. They are all read here, once per
// client instance, by loadConfig; an Option for the same setting wins.
const (
	EnvAZ                = azdetect.EnvAZ
	EnvClientID          = "AZKAFKA_CLIENT_ID"
	EnvSessionID         = "AZKAFKA_SESSION_ID"
	EnvInterzoneLB       = "AZKAFKA_INTERZONE_LB"
	EnvMaxConnRate       = "AZKAFKA_MAX_CONN_RATE"
	EnvMaxConnBurst      = "AZKAFKA_MAX_CONN_BURST"
	EnvRedialBackoffMin  = "AZKAFKA_REDIAL_BACKOFF_MIN"
	EnvRedialBackoffMax  = "AZKAFKA_REDIAL_BACKOFF_MAX"
	EnvRetryMaxAttempts  = "AZKAFKA_RETRY_MAX_ATTEMPTS"
	EnvRetryBackoffMin   = "AZKAFKA_RETRY_BACKOFF_MIN"
	EnvRetryBackoffMax   = "AZKAFKA_RETRY_BACKOFF_MAX"
	EnvIdempotence       = "AZKAFKA_IDEMPOTENCE"
	EnvRackAware         = "AZKAFKA_RACK_AWARE_PARTITIONING"
	EnvFetchFromFollower = "AZKAFKA_FETCH_FROM_FOLLOWER"
	EnvGroupProtocol     = "AZKAFKA_GROUP_PROTOCOL"
	EnvGroupInstanceID   = "AZKAFKA_GROUP_INSTANCE_ID"
	EnvTransactionalID   = "AZKAFKA_TRANSACTIONAL_ID"
	EnvTxnTimeout        = "AZKAFKA_TRANSACTION_TIMEOUT"
	EnvMaxResponseBytes  = frameguard.LimitVar
)

// Defaults of the connection policy and of the retry policy.
const (
	// DefaultMaxConnRate is the process-wide limit on new connections per
	// second. A kafka-go Writer holds about one connection per broker and a
	// Reader two or three; 50/s lets a service with a dozen clients on a
	// six-broker cluster connect within a few seconds, while a storm of
	// reconnects from one process stays far below what a broker with
	// KIP-612's per-IP limit (max.connection.creation.rate) is usually
	// configured to accept.
	DefaultMaxConnRate = 50.0
	// DefaultMaxConnBurst is the number of connections that may open at
	// once before the rate applies: enough for a normal start-up.
	DefaultMaxConnBurst = 50
	// DefaultRedialBackoffMin and DefaultRedialBackoffMax bound the
	// full-jitter delay before re-dialing an address whose last connection
	// failed or was closed early.
	DefaultRedialBackoffMin = 50 * time.Millisecond
	DefaultRedialBackoffMax = time.Second
)

// Option configures a client built by this package. Options win over the
// AZKAFKA_* environment variables; a later option wins over an earlier
// one. Each option's doc says which constructors take it when not all do;
// the others refuse it with an error naming the option and the
// constructors that take it, e.g. "sdk: NewReader: WithIdempotence is an
// option of NewWriter only". A nil Option is ignored.
//
// Options have the shape of package iq's: one interface per package, over
// internal/settings.Opt, so that a program passes one []Option to every
// constructor, and a misplaced option is an error, not silently ignored.
type Option interface{ opt() settings.Opt[config] }

// option is every Option.
type option settings.Opt[config]

func (o option) opt() settings.Opt[config] { return settings.Opt[config](o) }

// ctor is a set of the package's constructors.
type ctor = settings.Ctors

const (
	anyCtor       ctor = 0               // ResolveIdentity, WriterIdempotence: every option is understood
	ctorWriter    ctor = 1 << (iota - 1) // NewWriter
	ctorReader                           // NewReader
	ctorDialer                           // NewAZAwareDialer
	ctorTransport                        // NewTransport
	ctorTxnWriter                        // NewTxnWriter
	ctorProcessor                        // NewProcessor

	ctorTxn     = ctorTxnWriter | ctorProcessor
	ctorGroup   = ctorReader | ctorProcessor
	ctorClients = ctorWriter | ctorReader | ctorTxn
	ctorAll     = ctorClients | ctorDialer | ctorTransport
)

// ctorNames names the constructors, bit by bit.
var ctorNames = settings.Constructors{"NewWriter", "NewReader", "NewAZAwareDialer", "NewTransport", "NewTxnWriter", "NewProcessor"}

// set is an option every constructor takes.
func set(name string, f func(c *config)) Option {
	return option{Name: name, Takes: ctorAll, Set: func(c *config) error { f(c); return nil }}
}

// check is an option every constructor takes whose value f checks; f's
// error names the call.
func check(name string, f func(c *config) error) Option {
	return option{Name: name, Takes: ctorAll, Set: f}
}

// only is an option the constructors of takes only take.
func only(name string, takes ctor, f func(c *config)) Option {
	return option{Name: name, Takes: takes, Set: func(c *config) error { f(c); return nil }}
}

// forCtor marks the options as given to c: a constructor puts it first.
func forCtor(to ctor) Option { return set("forCtor", func(c *config) { c.ctor = to }) }

// withResponseFloor raises the response limit to at least n.
func withResponseFloor(n int) Option {
	return set("withResponseFloor", func(c *config) { c.responseFloor = n })
}

// WithClientID sets the application's own client ID, sent as the first
// segment. Default: the base Dialer's or Transport's ClientID, else
// $AZKAFKA_CLIENT_ID, else none.
func WithClientID(id string) Option {
	return check("WithClientID", func(c *config) error {
		if _, err := cleanUserID(id); err != nil {
			return fmt.Errorf("WithClientID: %w", err)
		}
		c.userID = id
		return nil
	})
}

// WithAZ sets the availability zone and skips detection. Default:
// $AZKAFKA_AZ, else azdetect.Detect.
func WithAZ(az string) Option {
	return check("WithAZ", func(c *config) error {
		if err := validAZ(az); err != nil {
			return fmt.Errorf("WithAZ(%s): %w", quote(az), err)
		}
		c.azOption = &az
		return nil
	})
}

// WithSessionID sets the session ID (a canonical UUID). Default:
// $AZKAFKA_SESSION_ID, else a new random (v4) UUID per client instance.
func WithSessionID(id string) Option {
	return check("WithSessionID", func(c *config) error {
		if err := validSessionID(id); err != nil {
			return fmt.Errorf("WithSessionID(%s): %w", quote(id), err)
		}
		c.sessionID = id
		return nil
	})
}

// WithInterzoneLB turns the warpstream_interzone_lb=true pair on or off.
// Default: $AZKAFKA_INTERZONE_LB, else true.
func WithInterzoneLB(on bool) Option {
	return set("WithInterzoneLB", func(c *config) { c.interzoneLB = on })
}

// WithLogger sets the logger. Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return set("WithLogger", func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

// WithMaxConnRate limits new connections to perSecond, with bursts of
// burst. The limiter is shared by every client of the process configured
// with the same rate and burst. perSecond 0 means unlimited.
// Default: $AZKAFKA_MAX_CONN_RATE and $AZKAFKA_MAX_CONN_BURST, else
// DefaultMaxConnRate and DefaultMaxConnBurst.
func WithMaxConnRate(perSecond float64, burst int) Option {
	return check("WithMaxConnRate", func(c *config) error {
		if r := perSecond; r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			return fmt.Errorf("WithMaxConnRate(%v, %d): rate must be a finite number >= 0", r, burst)
		}
		if perSecond > 0 && burst < 1 {
			return fmt.Errorf("WithMaxConnRate(%v, %d): burst must be >= 1", perSecond, burst)
		}
		c.connRate, c.connBurst = perSecond, burst
		return nil
	})
}

// WithConnLimiter makes the client take a token from l before each new
// connection, instead of the process-wide limiter: pass a fresh
// rate.NewLimiter for a private limit, or the same one to several clients
// to share it. nil means unlimited. It wins over WithMaxConnRate.
func WithConnLimiter(l *rate.Limiter) Option {
	return set("WithConnLimiter", func(c *config) { c.limiter, c.limiterSet = l, true })
}

// WithRedialBackoff sets the full-jitter backoff before re-dialing an
// address whose last connection failed or closed before serving a request.
// Default: $AZKAFKA_REDIAL_BACKOFF_MIN and $AZKAFKA_REDIAL_BACKOFF_MAX, else
// DefaultRedialBackoffMin and DefaultRedialBackoffMax (50ms and 1s).
func WithRedialBackoff(b retry.Backoff) Option {
	return set("WithRedialBackoff", func(c *config) { c.redialBackoff = b })
}

// WithRetryPolicy sets the policy the Writer and Reader use to retry
// transient errors, and wins over WithRetry and the environment.
func WithRetryPolicy(p retry.Policy) Option {
	return set("WithRetryPolicy", func(c *config) { c.retryPolicy = &p })
}

// WithRetry sets the retry bounds: total attempts, and the full-jitter
// backoff window. The Writer's engine does not count attempts: its
// delivery budget is maxAttempts × (kafka.Writer.WriteTimeout + max), 110 s
// by default (see Writer). Default: $AZKAFKA_RETRY_MAX_ATTEMPTS (10),
// $AZKAFKA_RETRY_BACKOFF_MIN (100ms), $AZKAFKA_RETRY_BACKOFF_MAX (1s).
func WithRetry(maxAttempts int, min, max time.Duration) Option {
	return check("WithRetry", func(c *config) error {
		if maxAttempts < 1 || min <= 0 || max < min {
			return fmt.Errorf("WithRetry(%d, %v, %v): want attempts >= 1 and 0 < min <= max", maxAttempts, min, max)
		}
		c.retry.MaxAttempts, c.retry.Backoff.Min, c.retry.Backoff.Max = maxAttempts, min, max
		return nil
	})
}

// WithIdempotence turns the Writer's idempotent produce path on or off.
// On (true) requires kafka.Writer.RequiredAcks = kafka.RequireAll, or
// NewWriter fails; if the cluster then refuses a producer ID,
// WriteMessages returns that error rather than writing without
// idempotence. Default: $AZKAFKA_IDEMPOTENCE (auto, true or false), else
// auto: on when RequiredAcks is RequireAll, and when the cluster refuses a
// producer ID, one warning and the at-least-once path. See Writer.
func WithIdempotence(on bool) Option {
	return only("WithIdempotence", ctorWriter, func(c *config) { c.idempotence = idempotenceOption(on) })
}

// WithRackAwarePartitioning turns the Writer's rack-aware partitioning of
// keyless messages on or off: a message without a key goes to a partition
// whose leader's rack (broker.rack) is the client's AZ, chosen among those
// by the Writer's Balancer; when no leader is in the AZ, or the AZ is
// unknown (NewWriter then logs a warning), among all partitions as
// before. Messages with a key are never moved. Every RequiredAcks
// uses it. The leaders' racks come from a Metadata request the Writer makes
// when its view is older than the Transport's MetadataTTL (6 s when unset),
// so a moved leader is followed within MetadataTTL. On MSK the racks are
// zone IDs: run with AZKAFKA_AZ_FORMAT=id. Default:
// $AZKAFKA_RACK_AWARE_PARTITIONING, else false.
func WithRackAwarePartitioning(on bool) Option {
	return only("WithRackAwarePartitioning", ctorWriter, func(c *config) { c.rackAware = on })
}

// WithFetchFromFollower turns the Reader's fetch-from-follower (KIP-392)
// on or off: with it on, the Reader sends its AZ as the rack ID of every
// fetch, so that a broker running
// replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector
// directs it to the replica in its own zone, whichever broker leads the
// partition (see Reader for what happens when that replica dies or lags).
// It has no effect when the AZ is unknown, or on clusters whose brokers
// select no preferred replica (WarpStream agents already serve every
// partition in-zone). Default: $AZKAFKA_FETCH_FROM_FOLLOWER (auto, true or
// false), else auto: on whenever the AZ is known.
func WithFetchFromFollower(on bool) Option {
	return only("WithFetchFromFollower", ctorReader, func(c *config) {
		c.fetchFollower = fetchFollowerOff
		if on {
			c.fetchFollower = fetchFollowerOn
		}
	})
}

// GroupProtocol is the consumer group protocol of a Reader with a GroupID.
type GroupProtocol string

const (
	// GroupProtocolClassic is the classic protocol (JoinGroup/SyncGroup):
	// the group's leader member assigns partitions with the
	// kafka.ReaderConfig.GroupBalancers, and every rebalance stops the
	// whole group. It mixes with kafka-go and Java members of the same
	// group. The default.
	GroupProtocolClassic GroupProtocol = "classic"
	// GroupProtocolConsumer is KIP-848's consumer protocol
	// (ConsumerGroupHeartbeat, GA since Kafka 4.0): the broker assigns
	// partitions (group.consumer.assignors: range when
	// kafka.ReaderConfig.GroupBalancers lists kafka.RangeGroupBalancer
	// first, else Kafka's default uniform) and moves them one at a time,
	// with no group-wide stop. The GroupBalancers themselves do not run. A classic group with members can move to it only through
	// Kafka's online upgrade (group.protocol.migration).
	GroupProtocolConsumer GroupProtocol = "consumer"
)

// WithGroupProtocol sets the Reader's consumer group protocol.
// Default: $AZKAFKA_GROUP_PROTOCOL (classic or consumer), else classic.
func WithGroupProtocol(p GroupProtocol) Option {
	return option{Name: "WithGroupProtocol", Takes: ctorGroup, Set: func(c *config) (err error) {
		if c.groupProtocol, err = parseGroupProtocol(string(p)); err != nil {
			return fmt.Errorf("WithGroupProtocol(%s): %w", quote(string(p)), err)
		}
		return nil
	}}
}

// WithGroupInstanceID makes a Reader with a GroupID a static member of
// its group (KIP-345, group.instance.id): Close does not leave the group,
// so a Reader restarted with the same ID within
// kafka.ReaderConfig.SessionTimeout gets its partitions back without a
// rebalance of the group (under GroupProtocolConsumer, KIP-848's static
// membership does the same). Give each member its own stable ID, such as
// its Kubernetes pod name (AZKAFKA_GROUP_INSTANCE_ID=$(POD_NAME) through
// the downward API); two live members with one ID fence each other. A
// member that really goes away is removed when its session times out.
// The ID is at most 249 characters of [a-zA-Z0-9._-]. Default:
// $AZKAFKA_GROUP_INSTANCE_ID, else none (a dynamic member, as in
// kafka-go).
func WithGroupInstanceID(id string) Option {
	return option{Name: "WithGroupInstanceID", Takes: ctorGroup, Set: func(c *config) error {
		if err := validInstanceID(id); err != nil {
			return fmt.Errorf("WithGroupInstanceID(%s): %w", quote(id), err)
		}
		c.instanceID = id
		return nil
	}}
}

// validInstanceID checks a group.instance.id as Kafka does: 1 to 249
// characters of [a-zA-Z0-9._-].
func validInstanceID(id string) error {
	if id == "" || len(id) > 249 {
		return errors.New("want 1 to 249 characters")
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%q is not allowed: want letters, digits, '.', '_' and '-'", r)
		}
	}
	return nil
}

// RebalanceCallbacks are called when a Reader with a GroupID gains or
// loses partitions (WithRebalanceCallbacks); each gets the partitions by
// topic, never none: Revoked and Lost are not called when the member had
// no partitions (while the brokers are unreachable, each failed rejoin
// loses nothing). kafka-go has none.
//
// They run on the engine's group goroutine, one at a time, and the group
// waits for them: keep them short (Revoked must end within
// kafka.ReaderConfig.RebalanceTimeout, or the member is removed). Their
// ctx ends after RebalanceTimeout, or when the Reader is closed. Inside
// them, CommitMessages (given that ctx: a commit with it returns a
// generation change as its error instead of waiting for the next
// generation, which waits for the callback), Assignment, Lag, Pause,
// Resume and Stats may be called; FetchMessage, ReadMessage, Seek and
// Close must not (they wait for the rebalance the callback holds up: a
// deadlock, which Close ends after ReaderCloseTimeout).
type RebalanceCallbacks struct {
	// Assigned is called once the Reader owns the partitions, before
	// any of their messages is handed out.
	Assigned func(ctx context.Context, partitions map[string][]int)
	// Revoked is called when the group takes partitions away in a
	// rebalance, and at Close (a static member's too: the group keeps
	// its partitions for it until SessionTimeout, but this Reader stops
	// reading them), before the Reader commits their marked offsets
	// (CommitInterval > 0) and drops their buffered messages: messages
	// committed here with CommitMessages are in that commit.
	Revoked func(ctx context.Context, partitions map[string][]int)
	// Lost is called when the Reader lost its partitions without a
	// rebalance: the engine ended the group session on an error and
	// rejoins. That is any heartbeat (or join) failure past the engine's
	// retries, the brokers unreachable included: with them unreachable it
	// fires once the heartbeat's retries give up, which can be well
	// before SessionTimeout; the session expired (UNKNOWN_MEMBER_ID);
	// the member fenced (FENCED_INSTANCE_ID: another Reader took its
	// WithGroupInstanceID); the group gone. Another member may already
	// own the partitions, so commits of them likely fail (a commit with
	// the callback's ctx returns that error); the Reader
	// reads again once it has rejoined and Assigned is called.
	Lost func(ctx context.Context, partitions map[string][]int)
}

// WithRebalanceCallbacks sets the callbacks a Reader with a GroupID calls
// when its partitions change (see RebalanceCallbacks: keep them short and
// non-blocking, the group waits for them). Default: none.
func WithRebalanceCallbacks(cb RebalanceCallbacks) Option {
	return only("WithRebalanceCallbacks", ctorReader, func(c *config) { c.rebalance = cb })
}

// DefaultTxnTimeout is the default transaction timeout
// (WithTransactionTimeout): the cluster aborts a transaction open longer.
const DefaultTxnTimeout = 10 * time.Second

// WithTransactionalID sets the transactional ID of a TxnWriter or a
// Processor (transactional.id): unique per instance, and the same across
// its restarts (e.g. the pod name), so that a restarted instance fences
// the one it replaces and aborts what that left open. Overrides
// $AZKAFKA_TRANSACTIONAL_ID. At most 249 characters of [a-zA-Z0-9._-].
func WithTransactionalID(id string) Option {
	return option{Name: "WithTransactionalID", Takes: ctorTxn, Set: func(c *config) error {
		if err := validInstanceID(id); err != nil {
			return fmt.Errorf("WithTransactionalID(%s): %w", quote(id), err)
		}
		c.txnID = id
		return nil
	}}
}

// WithTransactionTimeout sets how long the cluster lets a transaction of
// a TxnWriter or a Processor stay open before aborting it
// (transaction.timeout.ms). Overrides $AZKAFKA_TRANSACTION_TIMEOUT.
// Default: DefaultTxnTimeout.
func WithTransactionTimeout(d time.Duration) Option {
	return option{Name: "WithTransactionTimeout", Takes: ctorTxn, Set: func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithTransactionTimeout(%v): want a positive duration", d)
		}
		c.txnTimeout = d
		return nil
	}}
}

// DefaultMaxResponseBytes is the default limit on the size of one
// response a client reads: 100 MiB, as a broker's socket.request.max.bytes
// and kgo's BrokerMaxReadBytes. A Reader raises its own limit to 1.5 times
// its largest fetch (kafka.ReaderConfig.MaxBytes, at least
// DefaultFetchMaxBytes) when that is more.
const DefaultMaxResponseBytes = frameguard.DefaultMaxResponseBytes

// WithMaxResponseBytes sets the limit on the size of one response read
// from a broker (see "Misbehaving brokers" in the package doc). A response
// whose size prefix is larger, negative or shorter than a correlation ID
// closes its connection with an error matching ErrBadResponse, before any
// decoder allocates for it. At least 65536. Default:
// $AZKAFKA_MAX_RESPONSE_BYTES, else DefaultMaxResponseBytes.
func WithMaxResponseBytes(n int) Option {
	return check("WithMaxResponseBytes", func(c *config) error {
		if err := frameguard.CheckLimit(n); err != nil {
			return fmt.Errorf("WithMaxResponseBytes(%d): %w", n, err)
		}
		c.maxResponse = n
		return nil
	})
}

// WithBaseDialer sets the kafka.Dialer whose TLS, SASL, timeouts and
// resolver the client's Dialer keeps. Default: kafka.DefaultDialer's
// settings.
func WithBaseDialer(d *kafka.Dialer) Option {
	return set("WithBaseDialer", func(c *config) { c.baseDialer = d })
}

// WithBaseTransport sets the kafka.Transport whose TLS, SASL, timeouts and
// resolver the client's Transport keeps. Default: a zero kafka.Transport.
func WithBaseTransport(t *kafka.Transport) Option {
	return set("WithBaseTransport", func(c *config) { c.baseTransport = t })
}

// WithGetenv replaces os.Getenv as the source of AZKAFKA_* variables.
func WithGetenv(getenv func(string) string) Option {
	return set("WithGetenv", func(c *config) { c.getenv = getenv })
}

// WithDetector replaces azdetect.Detect, called when neither WithAZ nor
// $AZKAFKA_AZ gives the zone.
func WithDetector(detect func(context.Context) (azdetect.Result, error)) Option {
	return set("WithDetector", func(c *config) { c.detect = detect })
}

// config is the resolved configuration of one client instance, and what
// the options set on the way to it.
type config struct {
	userID        string
	az            string // "" when unknown
	azSource      string // "option", "env", a detector's source, or ""
	azErr         error  // why az is unknown
	sessionID     string // "" means: generate one
	interzoneLB   bool
	logger        *slog.Logger
	limiter       *rate.Limiter
	connRate      float64 // 0: unlimited
	connBurst     int
	redialBackoff retry.Backoff
	retry         retry.Policy
	idempotence   idempotence
	rackAware     bool
	fetchFollower fetchFollower
	groupProtocol GroupProtocol
	instanceID    string // group.instance.id; "" for a dynamic member
	txnID         string // transactional.id; "" for none
	txnTimeout    time.Duration
	rebalance     RebalanceCallbacks
	maxResponse   int
	baseDialer    *kafka.Dialer
	baseTransport *kafka.Transport
	metrics       metrics.Provider
	engineHooks   []kgo.Hook
	clock         clock
	// bootstrapTimeout: see DefaultBootstrapTimeout.
	bootstrapTimeout time.Duration

	// Set by options, resolved by loadConfig.
	ctor          ctor                                           // the constructor the options are given to
	getenv        func(string) string                            // WithGetenv
	detect        func(context.Context) (azdetect.Result, error) // WithDetector
	azOption      *string                                        // WithAZ
	limiterSet    bool                                           // WithConnLimiter, which wins over WithMaxConnRate
	retryPolicy   *retry.Policy                                  // WithRetryPolicy, which wins over WithRetry
	responseFloor int                                            // withResponseFloor
}

// loadConfig resolves one client's configuration, in kgo's shape: the
// defaults (defaultConfig, from the table's), then the environment (the
// table envVars), then the options, then one validate; then the AZ
// (resolveAZ, which detects it only when neither an option nor the
// environment gives it), then what the session derives (resolveSession).
// Nothing changes the result afterwards. Every
// invalid value is reported, joined, each naming its source and quoting
// the value, also a variable an option overrides.
func loadConfig(ctx context.Context, opts []Option) (config, error) {
	c := defaultConfig()
	// What the options say about reading the environment (WithGetenv,
	// WithLogger) and the constructor, before the environment.
	probe := c
	applyOptions(&probe, opts)
	lookup := envLookup(probe.getenv)
	warnUnknownEnv(probe)

	// The environment first, every variable validated even when an
	// option overrides it: a broken environment is reported, never
	// ignored. Then the options, then what depends on both.
	table, others := varsFor(probe.ctor)
	errEnv := settings.Apply("sdk", table, &c, lookup)
	// A bad variable only another kind of client reads does not stop
	// this one; it is worth a warning.
	var scratch config
	if err := settings.Apply("sdk", others, &scratch, lookup); err != nil {
		probe.logger.Warn("azkafka: a variable this client does not read is invalid; the clients that read it will refuse it",
			slog.String("client", ctorNames.Of(probe.ctor)), slog.Any("error", err))
	}
	errOpts := applyOptions(&c, opts)
	// azdetect's variables (AZKAFKA_AZ, WARPSTREAM_AVAILABILITY_ZONE,
	// AZKAFKA_DETECT_*, the cloud endpoints), through the same lookup.
	dcfg, errDetect := azdetect.ConfigFromLookup(lookup)
	if err := errors.Join(errEnv, errOpts, errDetect, c.validate()); err != nil {
		return config{}, err
	}
	c.resolveAZ(ctx, dcfg)
	if err := c.resolveSession(); err != nil {
		return config{}, err
	}
	return c, nil
}

// resolveSession completes what the session derives from the settings:
// a session ID when none is given, and the base Transport's dial, TLS and
// SASL as the engine's base Dialer.
func (c *config) resolveSession() error {
	if c.sessionID == "" {
		u, err := uuid.NewRandom()
		if err != nil {
			return fmt.Errorf("sdk: generating a session ID: %w", err)
		}
		c.sessionID = u.String()
	}
	if c.baseDialer == nil && c.baseTransport != nil {
		c.baseDialer = transportDialer(c.baseTransport)
	}
	return nil
}

// applyOptions applies opts to c, for the constructor the first of them
// names (forCtor), and returns every problem joined.
func applyOptions(c *config, opts []Option) error {
	list := make([]settings.Opt[config], 0, len(opts))
	for _, o := range opts {
		if o != nil {
			list = append(list, o.opt())
		}
	}
	// forCtor comes first: the constructor is known before the others.
	to := anyCtor
	if len(list) > 0 && list[0].Name == "forCtor" {
		_ = list[0].Set(c)
		to, list = c.ctor, list[1:]
	}
	return settings.ApplyOpts("sdk", ctorNames, to, c, list)
}

// warnUnknownEnv warns, once per process, of AZKAFKA_* variables no
// package reads, unless the options give the environment.
func warnUnknownEnv(c config) {
	if c.getenv != nil {
		return
	}
	unknownEnvOnce.Do(func() {
		for _, err := range CheckEnv(os.Environ()) {
			c.logger.Warn("azkafka: a variable no package of azkafka reads is ignored", slog.Any("error", err), slog.String("fix", "rename or remove it"))
		}
	})
}

// defaultConfig is the configuration before the environment and the
// options: the defaults of the table (each parsed by its row, as the
// variable would be) and those no variable sets.
func defaultConfig() config {
	c := config{
		logger:           slog.Default(),
		clock:            realClock(),
		bootstrapTimeout: DefaultBootstrapTimeout,
	}
	settings.ApplyDefaults(envVars, &c)
	return c
}

// validate checks what no single variable or option decides, and resolves
// what one setting wins over another: the limiter, the retry policy, the
// response limit. It reports every problem joined.
func (c *config) validate() error {
	var errs []error
	if c.connRate > 0 && c.connBurst < 1 {
		errs = append(errs, fmt.Errorf("sdk: connection burst %d must be >= 1 with a rate of %v (%s)", c.connBurst, c.connRate, EnvMaxConnBurst))
	}
	if !c.limiterSet && c.connRate > 0 {
		c.limiter = sharedLimiter(c.connRate, c.connBurst)
	}
	// A max of 0 is one whose variable did not parse (reported as such).
	if c.redialBackoff.Max > 0 && c.redialBackoff.Max < c.redialBackoff.Min {
		errs = append(errs, fmt.Errorf("sdk: re-dial backoff max %v is below min %v (%s, %s, or WithRedialBackoff)",
			c.redialBackoff.Max, c.redialBackoff.Min, EnvRedialBackoffMax, EnvRedialBackoffMin))
	}
	if c.retryPolicy != nil {
		c.retry = *c.retryPolicy
	} else if c.retry.Backoff.Max > 0 && c.retry.Backoff.Max < c.retry.Backoff.Min {
		errs = append(errs, fmt.Errorf("sdk: retry backoff max %v is below min %v (%s, %s)",
			c.retry.Backoff.Max, c.retry.Backoff.Min, EnvRetryBackoffMax, EnvRetryBackoffMin))
	}
	c.maxResponse = max(c.maxResponse, c.responseFloor)
	return errors.Join(errs...)
}

// resolveAZ sets c's AZ: the option, else the environment, else detected
// (once per process, with azdetect's variables as dcfg read them).
// Detection is the only slow step, and loadConfig skips it when the
// configuration is invalid anyway.
func (c *config) resolveAZ(ctx context.Context, dcfg azdetect.Config) {
	switch {
	case c.azOption != nil:
		c.az, c.azSource = *c.azOption, azdetect.SourceOption
	case dcfg.EnvAZ != "":
		// ConfigFromLookup validated it (trimmed, as every variable).
		c.az, c.azSource = dcfg.EnvAZ, azdetect.SourceEnv
	default:
		detect := c.detect
		switch {
		case detect != nil:
		case c.getenv == nil:
			detect = azdetect.Detect // process-wide cache
		default:
			detect = azdetect.New(dcfg).Detect
		}
		res, err := detect(ctx)
		switch {
		case err != nil:
			c.azErr = err
		case validAZ(res.AZ) != nil:
			c.azErr = fmt.Errorf("detected AZ %s from %s: %w", quote(res.AZ), res.Source, validAZ(res.AZ))
		default:
			c.az, c.azSource = res.AZ, res.Source
		}
	}
}

func init() { settings.Register("sdk", envVars, func() config { return config{} }) }

// envVars is the table of the package's settings: every variable
// loadConfig reads for itself, in the README's order (see package
// internal/settings: the README's rows are generated from it by
// TestREADMEConfigTable, and each option's doc names its variable; a
// Default given as settings.Code(x) is also the configuration's default,
// parsed by the row). Adding a setting is one row here plus its option,
// its Default constant and the field of config they set.
// azdetect reads its own variables (AZKAFKA_AZ, AZKAFKA_DETECT_*, ...).
var envVars = []settings.Var[config]{
	{Name: EnvClientID, Default: "none", Option: "WithClientID",
		Doc: "User client ID, sent first.",
		Set: func(c *config, v string) error {
			if _, err := cleanUserID(v); err != nil {
				return err
			}
			c.userID = v
			return nil
		}},
	{Name: EnvSessionID, Default: "random UUID v4 per client", Option: "WithSessionID",
		Doc: "Session ID, canonical lower-case UUID.",
		Set: func(c *config, v string) error {
			if err := validSessionID(v); err != nil {
				return err
			}
			c.sessionID = v
			return nil
		}},
	{Name: EnvInterzoneLB, Default: settings.Code(true), Option: "WithInterzoneLB",
		Doc: "`false` leaves out `warpstream_interzone_lb=true`.",
		Set: func(c *config, v string) (err error) {
			c.interzoneLB, err = settings.ParseBool(v)
			return err
		}},
	{Name: EnvMaxConnRate, Default: settings.Code(DefaultMaxConnRate), Option: "WithMaxConnRate",
		Doc: "New connections per second, per process (all clients with the same rate and burst share one limiter). `0` or `off`: unlimited.",
		Set: func(c *config, v string) (err error) {
			c.connRate, err = parseRate(v)
			return err
		}},
	{Name: EnvMaxConnBurst, Default: settings.Code(DefaultMaxConnBurst), Option: "WithMaxConnRate",
		Doc: "Connections that may open at once before the rate applies.",
		Set: func(c *config, v string) (err error) {
			c.connBurst, err = parsePositiveInt(v)
			return err
		}},
	{Name: EnvRedialBackoffMin, Default: settings.Code(DefaultRedialBackoffMin), Option: "WithRedialBackoff",
		Doc: "First re-dial delay window after a failed or early-closed connection, counted from it; doubles per failure.",
		Set: func(c *config, v string) (err error) {
			c.redialBackoff.Min, err = parsePositiveDuration(v)
			return err
		}},
	{Name: EnvRedialBackoffMax, Default: settings.Code(DefaultRedialBackoffMax), Option: "WithRedialBackoff",
		Doc: "Cap of the re-dial window.",
		Set: func(c *config, v string) (err error) {
			c.redialBackoff.Max, err = parsePositiveDuration(v)
			return err
		}},
	{Name: EnvRetryMaxAttempts, Default: settings.Code(retry.DefaultMaxAttempts), Option: "WithRetry",
		Doc: "Attempts (first included) of the Reader's retries; for the Writer, with `WriteTimeout` and the backoff cap, its delivery budget in time: attempts × (`WriteTimeout` + backoff max), 110 s by default.",
		Set: func(c *config, v string) (err error) {
			c.retry.MaxAttempts, err = parsePositiveInt(v)
			return err
		}},
	{Name: EnvRetryBackoffMin, Default: settings.Code(retry.DefaultBackoffMin), Option: "WithRetry",
		Doc: "First retry delay window (full jitter, doubles per attempt).",
		Set: func(c *config, v string) (err error) {
			c.retry.Backoff.Min, err = parsePositiveDuration(v)
			return err
		}},
	{Name: EnvRetryBackoffMax, Default: settings.Code(retry.DefaultBackoffMax), Option: "WithRetry",
		Doc: "Cap of the retry window.",
		Set: func(c *config, v string) (err error) {
			c.retry.Backoff.Max, err = parsePositiveDuration(v)
			return err
		}},
	{Name: EnvIdempotence, Takes: ctorWriter, Default: settings.Code("auto"), Option: "WithIdempotence",
		Doc: "Writer idempotence: `auto` (on when `RequiredAcks` is `RequireAll`; a refused producer ID falls back to at least once with one warning), `true` (needs `RequireAll`; a refusal is an error), `false`. `sdk.WithIdempotence` wins.",
		Set: func(c *config, v string) (err error) {
			c.idempotence, err = parseIdempotence(v)
			return err
		}},
	{Name: EnvRackAware, Takes: ctorWriter, Default: settings.Code(false), Option: "WithRackAwarePartitioning",
		Doc: "Writer: `true` sends each message without a key to a partition whose leader's rack (`broker.rack`) is the client's AZ, chosen among those by the Writer's `Balancer`; with no leader in the AZ (or the AZ unknown), every partition as before. Keyed messages never move. `sdk.WithRackAwarePartitioning` wins.",
		Set: func(c *config, v string) (err error) {
			c.rackAware, err = settings.ParseBool(v)
			return err
		}},
	{Name: EnvFetchFromFollower, Takes: ctorReader, Default: settings.Code("auto"), Option: "WithFetchFromFollower",
		Doc: "Reader: fetch from the replica in the client's AZ (KIP-392; the AZ is sent as the fetch's rack ID). `auto`: on whenever the AZ is known; `true`; `false`. Needs brokers with `replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector` and `broker.rack` = the zone name (on MSK the zone ID: set `AZKAFKA_AZ_FORMAT=id`). `sdk.WithFetchFromFollower` wins.",
		Set: func(c *config, v string) error {
			switch strings.ToLower(v) {
			case "auto":
				c.fetchFollower = fetchFollowerAuto
			case "true":
				c.fetchFollower = fetchFollowerOn
			case "false":
				c.fetchFollower = fetchFollowerOff
			default:
				return errors.New("want auto, true or false (any case)")
			}
			return nil
		}},
	{Name: EnvGroupProtocol, Takes: ctorGroup, Default: settings.Code(GroupProtocolClassic), Option: "WithGroupProtocol",
		Doc: "Reader with a `GroupID`: `classic` (JoinGroup/SyncGroup, the `GroupBalancers` assign, mixes with kafka-go members) or `consumer` (KIP-848: the broker assigns, no group-wide stop; Kafka 4.0+). `sdk.WithGroupProtocol` wins.",
		Set: func(c *config, v string) (err error) {
			c.groupProtocol, err = parseGroupProtocol(v)
			return err
		}},
	{Name: EnvGroupInstanceID, Takes: ctorGroup, Default: "none", Option: "WithGroupInstanceID",
		Doc: "Reader with a `GroupID`: its static member ID (`group.instance.id`, KIP-345), e.g. the pod name; a restart within `SessionTimeout` does not rebalance the group. At most 249 characters of `[a-zA-Z0-9._-]`. `sdk.WithGroupInstanceID` wins.",
		Set: func(c *config, v string) error {
			if err := validInstanceID(v); err != nil {
				return err
			}
			c.instanceID = v
			return nil
		}},
	{Name: EnvTransactionalID, Takes: ctorTxn, Default: "none", Option: "WithTransactionalID",
		Doc: "TxnWriter and Processor: the `transactional.id`, unique per instance and kept across its restarts (e.g. the pod name), so that a restarted instance fences its predecessor and aborts what that left open at once. At most 249 characters of `[a-zA-Z0-9._-]`. Without it, `NewTxnWriter` is an error and a Processor uses its group ID and a random suffix. `sdk.WithTransactionalID` wins.",
		Set: func(c *config, v string) error {
			if err := validInstanceID(v); err != nil {
				return err
			}
			c.txnID = v
			return nil
		}},
	{Name: EnvTxnTimeout, Takes: ctorTxn, Default: settings.Code(DefaultTxnTimeout), Option: "WithTransactionTimeout",
		Doc: "TxnWriter and Processor: how long the cluster lets a transaction stay open before it aborts it (`transaction.timeout.ms`, at most the broker's `transaction.max.timeout.ms`, 15m by default); an instance that died mid-transaction holds read_committed readers of its partitions back that long unless it restarts with its `transactional.id`. `sdk.WithTransactionTimeout` wins.",
		Set: func(c *config, v string) (err error) {
			c.txnTimeout, err = parsePositiveDuration(v)
			return err
		}},
	frameguard.LimitRow[config]("WithMaxResponseBytes",
		"Largest response a client reads from a broker, in bytes (at least 65536); a larger, negative or too-short size prefix closes the connection with an error naming the address (see [Misbehaving brokers](#misbehaving-brokers)). A Reader raises its own limit to 1.5 × its largest fetch. `sdk.WithMaxResponseBytes` wins.",
		func(c *config, n int) { c.maxResponse = n }),
}

// varsFor splits the table into the variables a client built by to
// reads (its rows' Takes) and the others (none for anyCtor, which reads
// every one).
func varsFor(to ctor) (reads, others []settings.Var[config]) {
	for _, v := range envVars {
		if to != anyCtor && v.Takes != 0 && v.Takes&to == 0 {
			others = append(others, v)
			continue
		}
		reads = append(reads, v)
	}
	return reads, others
}

// envLookup is how the configuration reads a variable: through getenv
// when given (WithGetenv: "" is unset), else os.LookupEnv (set to "" is
// set, and blank).
func envLookup(getenv func(string) string) func(string) (string, bool) {
	if getenv == nil {
		return os.LookupEnv
	}
	return func(name string) (string, bool) {
		v := getenv(name)
		return v, v != ""
	}
}

// unknownEnvOnce makes the unknown-variable warnings once per process.
var unknownEnvOnce sync.Once

// CheckEnv returns an error for each AZKAFKA_* variable of environ
// (os.Environ's NAME=value form) that no package of azkafka reads, naming
// the closest known variable: a misspelled variable is otherwise silently
// ignored. Clients built without WithGetenv log these once per process,
// at Warn.
func CheckEnv(environ []string) []error {
	var errs []error
	for _, u := range envcheck.Check(environ) {
		if u.Closest != "" {
			errs = append(errs, fmt.Errorf("sdk: %s: unknown variable; did you mean %s?", u.Name, u.Closest))
		} else {
			errs = append(errs, fmt.Errorf("sdk: %s: unknown variable", u.Name))
		}
	}
	return errs
}

// fetchFollower is the Reader's fetch-from-follower setting.
type fetchFollower int

const (
	fetchFollowerAuto fetchFollower = iota // on when the AZ is known
	fetchFollowerOn
	fetchFollowerOff
)

// parseGroupProtocol parses AZKAFKA_GROUP_PROTOCOL and WithGroupProtocol.
func parseGroupProtocol(v string) (GroupProtocol, error) {
	switch p := GroupProtocol(strings.ToLower(v)); p {
	case GroupProtocolClassic, GroupProtocolConsumer:
		return p, nil
	}
	return "", errors.New("want classic or consumer")
}

// parseIdempotence parses AZKAFKA_IDEMPOTENCE.
func parseIdempotence(v string) (idempotence, error) {
	switch strings.ToLower(v) {
	case "auto":
		return idempotence{mode: idempotenceAuto}, nil
	case "true":
		return idempotence{mode: idempotenceOn, source: EnvIdempotence + "=" + v}, nil
	case "false":
		return idempotence{mode: idempotenceOff, source: EnvIdempotence + "=" + v}, nil
	}
	return idempotence{}, errors.New("want auto, true or false (any case)")
}

// idempotenceOption is the setting of WithIdempotence(on).
func idempotenceOption(on bool) idempotence {
	if on {
		return idempotence{mode: idempotenceOn, source: "WithIdempotence(true)"}
	}
	return idempotence{mode: idempotenceOff, source: "WithIdempotence(false)"}
}

// WriterIdempotence reports whether a Writer built with opts and the
// AZKAFKA_* environment, for a kafka.Writer with RequiredAcks acks, would
// produce idempotently, and why: the setting that decided, or auto and
// the acks. err is the error NewWriter would return for this setting
// (an invalid AZKAFKA_IDEMPOTENCE, or idempotence on with acks other than
// all). It does not contact the cluster, which can still refuse a
// producer ID (see Writer).
func WriterIdempotence(acks kafka.RequiredAcks, opts ...Option) (on bool, why string, err error) {
	// The variable through its row of the table, and the options, as
	// loadConfig reads them; other settings are not this function's.
	c := defaultConfig()
	probe := c
	applyOptions(&probe, opts)
	for _, v := range envVars {
		if v.Name == EnvIdempotence {
			if err := settings.Apply("sdk", []settings.Var[config]{v}, &c, envLookup(probe.getenv)); err != nil {
				return false, "", err
			}
		}
	}
	applyOptions(&c, opts)
	return idempotenceDecision(acks, c.idempotence)
}

// idempotence is the Writer's idempotence setting and where it came from.
type idempotence struct {
	mode   idempotenceMode
	source string // the option or variable that set it; "" for the default
}

type idempotenceMode int

const (
	idempotenceAuto idempotenceMode = iota
	idempotenceOn
	idempotenceOff
)

// parsePositiveDuration parses a duration > 0.
func parsePositiveDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		if durationSyntax.MatchString(v) && strings.ContainsAny(v, "123456789") {
			return 0, errors.New("a duration too long (at most about 2562047h)")
		}
		return 0, errors.New("not a duration (e.g. 250ms, 2s)")
	}
	if d <= 0 {
		return 0, errors.New("must be > 0")
	}
	return d, nil
}

// durationSyntax is what time.ParseDuration reads: one that refuses
// text of this shape refuses it for its size.
var durationSyntax = regexp.MustCompile(`^[-+]?([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$`)

// parseRate parses connections per second; "0" and "off" mean unlimited.
func parseRate(v string) (float64, error) {
	if strings.EqualFold(v, "off") {
		return 0, nil
	}
	r, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, fmt.Errorf("not a number (connections per second, or off)")
	}
	if r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		return 0, fmt.Errorf("must be a finite number >= 0 (0 or off: unlimited)")
	}
	return r, nil
}

func parsePositiveInt(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("not an integer")
	}
	if n < 1 {
		return 0, fmt.Errorf("must be >= 1")
	}
	return n, nil
}
