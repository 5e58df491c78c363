package sdk

// client.go holds what a Writer and a Reader share around their engine:
// the user's base Dialer or Transport put first in the options, the start
// of a client (its recorder and engine hooks), the engine hooked to the
// connection policy, and the end of the client. It pairs with session.go
// (the resolved setup every client starts from) and engine.go (the
// engine's options and hooks).

import (
	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/metrics"
)

// withBaseDialer puts d, if any, first in opts as the base whose TLS,
// SASL, timeouts and client ID the SDK keeps (below WithClientID for the
// client ID).
func withBaseDialer(d *kafka.Dialer, opts []Option) []Option {
	if d == nil {
		return opts
	}
	return append([]Option{WithBaseDialer(d), withFallbackUserID(d.ClientID)}, opts...)
}

// withBaseTransport is withBaseDialer for a base Transport.
func withBaseTransport(t *kafka.Transport, opts []Option) []Option {
	if t == nil {
		return opts
	}
	return append([]Option{WithBaseTransport(t), withFallbackUserID(t.ClientID)}, opts...)
}

// startClient starts the client of s that mc describes: its metrics
// Recorder, then the hooks of its engine, counting into c, with the
// bootstrap addresses seeds; reader says whether it is a Reader.
func startClient(s *session, mc metrics.Client, c *counters, reader bool, seeds []string) *engineHooks {
	s.startRecorder(mc)
	return newEngineHooks(s, c, reader, seeds)
}

// engineUp hooks the client's engine to the connection policy: after a
// peer closes or resets a connection, the engine refreshes its metadata.
func (s *session) engineUp(h *engineHooks) {
	refresh := h.refreshMetadata
	s.policy.onPeerClose.Store(&refresh)
}

// stop ends the client of s, whether its constructor failed or it was
// closed: the policy stops refreshing its engine, and its Recorder hears
// Closed.
func (s *session) stop() {
	if s.policy.onPeerClose.Load() != nil {
		s.policy.onPeerClose.Store(nil)
	}
	if s.rec != nil {
		s.rec.Closed()
	}
}
