// Package retry classifies Kafka client errors as transient (worth retrying
// on a fresh connection) or not, and provides a full-jitter exponential
// backoff policy.
//
// It is what package sdk uses, and works as well for programs that call
// segmentio/kafka-go directly:
//
//	p := retry.Policy{MaxAttempts: 5} // backoff 100ms..1s, full jitter
//	err := p.Do(ctx, func(ctx context.Context) error {
//		return r.CommitMessages(ctx, msg)
//	})
//
// kafka-go's own Writer retries io.ErrUnexpectedEOF, ECONNRESET, EPIPE and
// ECONNREFUSED, but not a plain io.EOF (a close during a TLS handshake) nor
// net.ErrClosed, which are what a client sees when a load balancer or a
// WarpStream agent closes its connection; IsTransient accepts all of them.
package retry
