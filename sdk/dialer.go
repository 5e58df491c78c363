package sdk

import (
	"context"

	"github.com/segmentio/kafka-go"
)

// NewAZAwareDialer returns a copy of base whose ClientID carries the
// WarpStream pairs (session ID, AZ, interzone flag) and whose DialFunc
// applies the connection policy: a limit on the rate of new connections,
// shared by the whole process by default, and a full-jitter backoff before
// re-dialing an address that failed or closed early.
//
// Use it wherever kafka-go takes a *kafka.Dialer: kafka.ReaderConfig.Dialer,
// Dialer.DialContext, Dialer.DialLeader. base may be nil
// (kafka.DefaultDialer's settings). Its TLS, SASLMechanism, Timeout,
// Deadline, Resolver and TransactionalID are kept as they are: kafka-go
// resolves the address before DialFunc and runs TLS and SASL on the
// connection DialFunc returns. Because kafka-go ignores LocalAddr,
// DualStack, FallbackDelay and KeepAlive once DialFunc is set, the policy
// dials with them itself; a base DialFunc is called by the policy.
// A non-empty base.ClientID is the user client ID unless WithClientID is
// given. Waits of the policy count against the Dialer's Timeout.
//
// Each call is one client instance: one session ID, one set of ConnStats.
// The AZ is detected (once per process) unless WithAZ or AZKAFKA_AZ gives
// it. Invalid options or AZKAFKA_* variables are errors. The returned
// Dialer is safe for concurrent use.
func NewAZAwareDialer(base *kafka.Dialer, opts ...Option) (*kafka.Dialer, error) {
	if base != nil {
		opts = append([]Option{WithBaseDialer(base), withFallbackUserID(base.ClientID)}, opts...)
	}
	s, err := newSession(context.Background(), opts)
	if err != nil {
		return nil, err
	}
	return s.dialer(), nil
}

// NewTransport returns a kafka.Transport for kafka.Writer.Transport and
// kafka.Client.Transport with the same client ID and connection policy as
// NewAZAwareDialer. base may be nil; otherwise its DialTimeout,
// IdleTimeout, MetadataTTL, MetadataTopics, TLS, SASL, Resolver and Context
// are copied, and its Dial is called by the policy. A non-empty
// base.ClientID is the user client ID unless WithClientID is given.
// Waits of the policy count against DialTimeout (default 5s).
//
// Each call is one client instance. The returned Transport is safe for
// concurrent use; close its idle connections with CloseIdleConnections.
func NewTransport(base *kafka.Transport, opts ...Option) (*kafka.Transport, error) {
	if base != nil {
		opts = append([]Option{WithBaseTransport(base), withFallbackUserID(base.ClientID)}, opts...)
	}
	s, err := newSession(context.Background(), opts)
	if err != nil {
		return nil, err
	}
	return s.transport(), nil
}

// withFallbackUserID sets the user client ID used when neither WithClientID
// nor... it is lower precedence than WithClientID, higher than the env.
func withFallbackUserID(id string) Option { return func(o *options) { o.fallbackUserID = id } }
