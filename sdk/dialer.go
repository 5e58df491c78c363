package sdk

// dialer.go serves programs that keep kafka-go's own clients:
// NewAZAwareDialer and NewTransport give a kafka.Dialer or kafka.Transport
// the client ID, the connection policy and the frame guard.

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"weak"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/metrics"
)

// NewAZAwareDialer returns a copy of base whose ClientID carries the
// WarpStream pairs (session ID, AZ, interzone flag) and whose DialFunc
// applies the connection policy: a limit on the rate of new connections,
// shared by the whole process by default, and a full-jitter backoff before
// re-dialing an address that failed or closed early.
//
// Use it wherever kafka-go takes a *kafka.Dialer: kafka.ReaderConfig.Dialer,
// Dialer.DialContext, Dialer.DialLeader. base may be nil
// (kafka.DefaultDialer's settings). Its SASLMechanism, Timeout, Deadline,
// Resolver and TransactionalID are kept as they are: kafka-go resolves the
// address before DialFunc and runs SASL on the connection DialFunc
// returns. Its TLS moves into DialFunc (the returned Dialer's TLS is nil):
// the handshake runs there with the same config (ServerName defaults to
// the broker's host, as in kafka-go) so that the frame guard below kafka-go
// reads plaintext (see "Misbehaving brokers" in the package doc). Because kafka-go ignores LocalAddr,
// FallbackDelay and KeepAlive once DialFunc is set, the policy dials with
// them itself (DualStack has been a no-op since Go 1.12); a base DialFunc
// is called by the policy. A non-empty base.ClientID is the user client ID
// unless WithClientID is given; with a nil base, or an empty ClientID, the
// client ID is the WarpStream pairs alone (kafka.DefaultDialer's
// "program@host (github.com/segmentio/kafka-go)" is not kept: set ClientID
// to name the program in the brokers' logs and quotas). Waits of the policy count against the
// Dialer's Timeout: a rate-limit slot later than the dial's deadline fails
// the dial at once with an error matching context.DeadlineExceeded.
//
// Each call is one client instance: one session ID, one set of ConnStats
// (see DialerConnStats), one metrics.Recorder (WithMetrics: its
// connection events). The AZ is detected unless WithAZ or AZKAFKA_AZ
// gives it; detection runs once per process and may block the first call
// for up to its budget (AZKAFKA_DETECT_TIMEOUT, default 1s). Invalid
// options or AZKAFKA_* variables are errors. The returned Dialer is safe
// for concurrent use.
func NewAZAwareDialer(base *kafka.Dialer, opts ...Option) (*kafka.Dialer, error) {
	s, err := newSession(context.Background(), append([]Option{forCtor(ctorDialer)}, withBaseDialer(base, opts)...))
	if err != nil {
		return nil, err
	}
	s.startRecorder(metrics.Client{Kind: metrics.KindDialer})
	d := s.dialer()
	registerDialer(d, s.policy)
	return d, nil
}

// NewTransport returns a kafka.Transport for kafka.Writer.Transport and
// kafka.Client.Transport with the same client ID and connection policy as
// NewAZAwareDialer. base may be nil; otherwise its DialTimeout,
// IdleTimeout, MetadataTTL, MetadataTopics, SASL, Resolver and Context are
// copied, and its Dial is called by the policy. Its TLS moves into the
// returned Transport's Dial (its TLS field is nil), as for
// NewAZAwareDialer. A non-empty
// base.ClientID is the user client ID unless WithClientID is given (an
// empty one, as kafka.Transport's default, leaves the WarpStream pairs
// alone).
// Waits of the policy count against DialTimeout (default 5s).
//
// Each call is one client instance. The returned Transport is safe for
// concurrent use; close its idle connections with CloseIdleConnections.
func NewTransport(base *kafka.Transport, opts ...Option) (*kafka.Transport, error) {
	s, err := newSession(context.Background(), append([]Option{forCtor(ctorTransport)}, withBaseTransport(base, opts)...))
	if err != nil {
		return nil, err
	}
	s.startRecorder(metrics.Client{Kind: metrics.KindTransport})
	t := s.transport()
	registerTransport(t, s.policy)
	return t, nil
}

// withFallbackUserID sets the user client ID taken from a base Dialer or
// Transport: below WithClientID, above $AZKAFKA_CLIENT_ID.
func withFallbackUserID(id string) Option {
	return check("base ClientID", func(c *config) error {
		if id == "" {
			return nil
		}
		if _, err := cleanUserID(id); err != nil {
			return fmt.Errorf("base ClientID: %w", err)
		}
		c.userID = id
		return nil
	})
}

// Connection policies of the Dialers and Transports made by this package,
// found by pointer. Weak keys: a Dialer or Transport the program drops is
// collected, and its entry removed.
var policies sync.Map // weak.Pointer[kafka.Dialer] or weak.Pointer[kafka.Transport] -> *connPolicy

func registerDialer(d *kafka.Dialer, p *connPolicy) {
	k := weak.Make(d)
	policies.Store(k, p)
	runtime.AddCleanup(d, func(k weak.Pointer[kafka.Dialer]) { policies.Delete(k) }, k)
}

func registerTransport(t *kafka.Transport, p *connPolicy) {
	k := weak.Make(t)
	policies.Store(k, p)
	runtime.AddCleanup(t, func(k weak.Pointer[kafka.Transport]) { policies.Delete(k) }, k)
}

// DialerConnStats returns the connection counters of a Dialer made by
// NewAZAwareDialer; ok is false for any other Dialer (a copy included).
// Safe for concurrent use.
func DialerConnStats(d *kafka.Dialer) (stats ConnStats, ok bool) {
	if p, found := policies.Load(weak.Make(d)); found {
		return p.(*connPolicy).stats.snapshot(), true
	}
	return ConnStats{}, false
}

// TransportConnStats returns the connection counters of a Transport made
// by NewTransport; ok is false for any other Transport. Safe for
// concurrent use.
func TransportConnStats(t *kafka.Transport) (stats ConnStats, ok bool) {
	if p, found := policies.Load(weak.Make(t)); found {
		return p.(*connPolicy).stats.snapshot(), true
	}
	return ConnStats{}, false
}
