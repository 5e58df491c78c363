package sdk

// session.go holds a client instance's session, its resolved setup (the
// client ID, the AZ, the policies, the base Dialer or Transport), the
// dial of kafka-go's clients through the connection policy, TLS and the
// frame guard, and Identity (what a client would send).

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/frameguard"
	"github.com/azkafka/azkafka/metrics"
)

// session is one client instance: its resolved configuration (as
// loadConfig made it), and what derives
// from it: the client ID, whether the Reader fetches from followers, the
// connection policy and the metrics recorder. The session ID stays the
// same for the life of the instance, across reconnects. Safe for
// concurrent use.
type session struct {
	config
	clientID string
	// fetchFromFollower: the Reader sends az as its rack ID (KIP-392).
	fetchFromFollower bool
	policy            *connPolicy
	rec               metrics.Recorder // nil until startRecorder, and without metrics
}

// unknownAZOnce makes the "AZ unknown" warning a once-per-process event:
// every client of the process would say the same thing.
var unknownAZOnce sync.Once

// newSession resolves opts and the environment into a session. An invalid
// option or variable is an error; an unknown AZ is not (the warpstream_az
// pair is left out and a warning is logged once per process).
func newSession(ctx context.Context, opts []Option) (*session, error) {
	c, err := loadConfig(ctx, opts)
	if err != nil {
		return nil, err
	}
	id, err := clientID(ClientIDParts{UserID: c.userID, SessionID: c.sessionID, AZ: c.az, InterzoneLB: c.interzoneLB})
	if err != nil {
		return nil, fmt.Errorf("sdk: %w", err)
	}
	if c.az == "" {
		unknownAZOnce.Do(func() {
			c.logger.Warn("azkafka: availability zone unknown; client IDs carry no warpstream_az, so the agent cannot keep traffic in-zone",
				slog.Any("error", c.azErr), slog.String("fix", "set "+EnvAZ+" or use sdk.WithAZ"))
		})
	}
	return &session{
		config:            c,
		clientID:          id,
		fetchFromFollower: c.az != "" && c.fetchFollower != fetchFollowerOff,
		policy:            newConnPolicy(c),
	}, nil
}

// dialer returns a new kafka.Dialer with the session's client ID and
// connection policy, keeping the base Dialer's other settings.
func (s *session) dialer() *kafka.Dialer {
	base := s.baseDialer
	if base == nil {
		base = kafka.DefaultDialer
	}
	d := *base // kafka.Dialer holds no lock; a shallow copy shares TLS/SASL values as kafka-go itself does
	d.ClientID = s.clientID
	d.DialFunc = s.kafkaGoDial(baseDial(base), base.TLS)
	d.TLS = nil // done by DialFunc, below the frame guard
	return &d
}

// kafkaGoDial is the dial function of the session's kafka-go Dialers and
// Transports: the connection policy around inner, then TLS with cfg (when
// not nil, as kafka-go would do it: ServerName defaults to the address's
// host), then the frame guard in Validate mode, since kafka-go decodes what
// the connection reads. kafka-go gets a plaintext connection and runs SASL
// on it.
func (s *session) kafkaGoDial(inner dialFunc, cfg *tls.Config) dialFunc {
	dial := s.policy.wrap(inner, cfg != nil)
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		if cfg != nil {
			if conn, err = tlsHandshake(ctx, conn, cfg, address); err != nil {
				return nil, err
			}
		}
		return s.guard(conn, address), nil
	}
}

// guard puts conn, dialed to address, behind the frame guard, in Validate
// mode: every client of the SDK reads through it.
func (s *session) guard(conn net.Conn, address string) net.Conn {
	if frameGuardOff.Load() {
		return conn
	}
	return frameguard.Wrap(conn, address, s.maxResponse, nil)
}

// frameGuardOff leaves connections unguarded; benchmarks set it to
// measure what the guard costs.
var frameGuardOff atomic.Bool

// tlsHandshake runs the TLS handshake on conn with cfg, whose ServerName
// defaults to address's host as in kafka-go, bounded by ctx. On failure
// conn is closed and the error names the address; a handshake the peer
// closes says to check for a plaintext listener.
func tlsHandshake(ctx context.Context, conn net.Conn, cfg *tls.Config, address string) (net.Conn, error) {
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		if host, _, err := net.SplitHostPort(address); err == nil {
			cfg.ServerName = host
		} else {
			cfg.ServerName = address
		}
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("sdk: TLS handshake with %s: %w", address, err)
		}
		// A plaintext listener reads the ClientHello as a frame size it
		// refuses, and closes.
		closed := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
		return nil, &handshakeError{addr: address, err: err, closed: closed}
	}
	return tc, nil
}

// baseDial is the dial function under the connection policy for a
// kafka.Dialer: its DialFunc, else a net.Dialer with its LocalAddr,
// FallbackDelay and KeepAlive (kafka-go ignores those once DialFunc is
// set, so the policy applies them itself; DualStack has been a no-op since
// Go 1.12).
func baseDial(d *kafka.Dialer) dialFunc {
	if d.DialFunc != nil {
		return d.DialFunc
	}
	return (&net.Dialer{
		LocalAddr:     d.LocalAddr,
		FallbackDelay: d.FallbackDelay,
		KeepAlive:     d.KeepAlive,
	}).DialContext
}

// transport returns a new kafka.Transport with the session's client ID and
// connection policy, keeping the base Transport's other settings.
func (s *session) transport() *kafka.Transport {
	t := &kafka.Transport{DialTimeout: 0}
	var inner dialFunc
	if b := s.baseTransport; b != nil {
		// Field by field: kafka.Transport holds a mutex and its pools.
		t.DialTimeout = b.DialTimeout
		t.IdleTimeout = b.IdleTimeout
		t.MetadataTTL = b.MetadataTTL
		t.MetadataTopics = b.MetadataTopics
		t.SASL = b.SASL
		t.Resolver = b.Resolver
		t.Context = b.Context
		inner = b.Dial
	}
	if inner == nil {
		// kafka-go's own default for a Transport without Dial.
		inner = (&net.Dialer{Timeout: 3 * time.Second}).DialContext
	}
	t.ClientID = s.clientID
	var cfg *tls.Config
	if s.baseTransport != nil {
		cfg = s.baseTransport.TLS
	}
	t.Dial = s.kafkaGoDial(inner, cfg) // TLS is done there, below the frame guard
	return t
}

// connStats returns the connection policy's counters.
func (s *session) connStats() ConnStats { return s.policy.stats.snapshot() }

// Identity is what a client instance configured with the same options and
// environment sends to the cluster.
type Identity struct {
	// ClientID is the full client ID.
	ClientID string
	// SessionID is the instance's session ID.
	SessionID string
	// AZ is the availability zone; "" when unknown (then ClientID has no
	// warpstream_az pair).
	AZ string
	// AZSource names where AZ came from: "option", "env", or the detecting
	// provider ("ec2", "gcp", ...); "" when unknown.
	AZSource string
	// AZError says why AZ is unknown; nil otherwise.
	AZError error
	// InterzoneLB reports whether ClientID asks for interzone load balancing.
	InterzoneLB bool
	// RackAwarePartitioning reports whether a Writer would send keyless
	// messages to partitions led in AZ (WithRackAwarePartitioning).
	RackAwarePartitioning bool
	// FetchFromFollower reports whether a Reader would send AZ as its
	// fetches' rack ID (WithFetchFromFollower).
	FetchFromFollower bool
	// GroupProtocol is the group protocol of a Reader with a GroupID
	// (WithGroupProtocol).
	GroupProtocol GroupProtocol
}

// ResolveIdentity resolves opts and the AZKAFKA_* environment as a new
// client instance would, and returns what it would send: each call makes a
// new session ID unless WithSessionID or AZKAFKA_SESSION_ID fixes it. It
// detects the AZ (once per process) unless WithAZ or AZKAFKA_AZ gives it,
// within ctx. Invalid configuration is an error naming the variable or
// option and the value. Safe for concurrent use.
func ResolveIdentity(ctx context.Context, opts ...Option) (Identity, error) {
	s, err := newSession(ctx, opts)
	if err != nil {
		return Identity{}, err
	}
	return Identity{
		ClientID:    s.clientID,
		SessionID:   s.sessionID,
		AZ:          s.az,
		AZSource:    s.azSource,
		AZError:     s.azErr,
		InterzoneLB: s.interzoneLB,

		RackAwarePartitioning: s.rackAware,
		FetchFromFollower:     s.fetchFromFollower,
		GroupProtocol:         s.groupProtocol,
	}, nil
}

// transportDialer is the base Transport t as the engine's base Dialer: its
// Dial, DialTimeout (kafka-go's default 5 s when unset), TLS, SASL and
// Resolver.
func transportDialer(t *kafka.Transport) *kafka.Dialer {
	d := &kafka.Dialer{
		Timeout:       t.DialTimeout,
		TLS:           t.TLS,
		SASLMechanism: t.SASL,
		DialFunc:      t.Dial,
	}
	if d.Timeout <= 0 {
		d.Timeout = 5 * time.Second
	}
	if t.Resolver != nil {
		d.Resolver = brokerResolver{t.Resolver}
	}
	return d
}

// brokerResolver runs a Transport's kafka.BrokerResolver as a Dialer's
// Resolver (the engine dials by host).
type brokerResolver struct{ r kafka.BrokerResolver }

func (b brokerResolver) LookupHost(ctx context.Context, host string) ([]string, error) {
	ips, err := b.r.LookupBrokerIPAddr(ctx, kafka.Broker{Host: host})
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out, nil
}
