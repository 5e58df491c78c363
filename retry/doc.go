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
//
// # Errors
//
// Policy.Do returns fn's own error when fn was called once, and otherwise
// an error that starts with "retry:", says how many attempts were made,
// and wraps fn's last error (and ctx's, when ctx ended during a backoff):
// callers match the cause with errors.Is and errors.As, e.g.
// errors.Is(err, io.EOF) or errors.Is(err, context.DeadlineExceeded).
// Sleep and SleepContext return ctx.Err(). The package defines no error
// values of its own.
package retry
