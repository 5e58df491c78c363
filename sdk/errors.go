package sdk

// errors.go holds the package's errors and its one classification of the
// errors the engine meets: transient ones are retried until the call's
// ctx or the delivery budget ends (engineTransient, with retry.IsTransient
// the list of connection errors), refusals no retry fixes are returned at
// once (engineFatal), and before a client ever reached its cluster some
// more end the wait (unfixable, see bootstrap.go). errorType names a class
// for the metrics. The errors a caller may match are exported here:
// ErrBadResponse, ErrNotOwned, the ErrTxn errors and *BootstrapError; the others keep kafka-go's shapes
// (kafkaError, ctxError).

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/azkafka/azkafka/internal/frameguard"
	"github.com/azkafka/azkafka/retry"
)

// ErrBadResponse is matched (errors.Is) by the error of a connection whose
// broker sent bytes that are not a Kafka response (see "Misbehaving
// brokers" in the package doc).
var ErrBadResponse = frameguard.ErrRefused

// BootstrapError is the error of a call made while the client has never
// reached its cluster, once every bootstrap address failed with an error
// no retry fixes, or DefaultBootstrapTimeout passed. It names each address
// and its last error; errors.Is and errors.As see those errors
// (*net.DNSError, *net.OpError, syscall.ECONNREFUSED, ErrBadResponse, ...).
type BootstrapError struct {
	// Addrs are the bootstrap addresses, Errs the last error of each (nil
	// for an address not dialed yet).
	Addrs []string
	Errs  []error
	// TimedOut: the timeout passed; else every address failed with an
	// error no retry fixes.
	TimedOut bool
	Timeout  time.Duration
	// sinceFailure: a broker answered a request, so the timeout ran
	// from the first failure, not from the first dial.
	sinceFailure bool
}

func (e *BootstrapError) Error() string {
	var b strings.Builder
	b.WriteString("sdk: no broker reached")
	switch {
	case e.TimedOut && e.sinceFailure:
		fmt.Fprintf(&b, " within %v of the first failure (a broker answered, then none did)", e.Timeout)
	case e.TimedOut:
		fmt.Fprintf(&b, " within %v of the first dial", e.Timeout)
	}
	b.WriteString(": ")
	for i, a := range e.Addrs {
		if i > 0 {
			b.WriteString("; ")
		}
		if e.Errs[i] == nil {
			b.WriteString(a + ": not dialed yet")
			continue
		}
		text := strings.TrimPrefix(e.Errs[i].Error(), "sdk: ")
		if !strings.HasPrefix(text, a) {
			text = a + ": " + text
		}
		b.WriteString(text)
	}
	return b.String()
}

// Unwrap returns the addresses' errors.
func (e *BootstrapError) Unwrap() []error {
	var errs []error
	for _, err := range e.Errs {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// engineFatal reports whether err is a refusal no retry can fix: the
// broker's certificate is not trusted, SASL failed, the authorizer said
// no, the client's TLS is wrong for the port.
func engineFatal(err error) bool {
	var cve *tls.CertificateVerificationError
	var ke *kerr.Error
	switch {
	case errors.As(err, &cve), errors.Is(err, ErrBadResponse):
		return true
	case errors.As(err, &ke):
		switch ke {
		case kerr.SaslAuthenticationFailed, kerr.UnsupportedSaslMechanism, kerr.IllegalSaslState,
			kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed, kerr.ClusterAuthorizationFailed,
			kerr.TransactionalIDAuthorizationFailed:
			return true
		}
	}
	return false
}

// engineTransient reports whether an error the engine returned is worth
// waiting out: the SDK's transient connection errors (retry.IsTransient)
// and the Kafka error codes marked retriable.
func engineTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return retry.IsTransient(err) || kerr.IsRetriable(err)
}

// unfixable reports whether a failure to reach a broker is one no retry
// fixes: an unknown host, a TLS handshake the port does not speak or
// closes (TLS against a plaintext listener), bytes that are not Kafka's
// (a plaintext client on a TLS port, an HTTP server), a certificate not
// trusted, a SASL mechanism the broker lacks.
func unfixable(err error) bool {
	var dns *net.DNSError
	var rhe tls.RecordHeaderError
	var alert tls.AlertError
	var cve *tls.CertificateVerificationError
	var hs *handshakeError
	switch {
	case errors.As(err, &dns):
		return dns.IsNotFound
	case errors.As(err, &rhe), errors.As(err, &alert), errors.As(err, &cve), errors.As(err, &hs):
		return true
	case errors.Is(err, ErrBadResponse), errors.Is(err, kerr.UnsupportedSaslMechanism), errors.Is(err, kerr.SaslAuthenticationFailed):
		return true
	}
	return false
}

// kafkaCoded is an engine error carrying a Kafka error code: it matches
// kafka-go's kafka.Error for that code too (what callers of kafka-go test
// with errors.Is), besides franz-go's kerr.Error.
type kafkaCoded struct {
	err  error
	code kafka.Error
}

// Error is kafka-go's text for a bare Kafka error code (a message's
// element of kafka.WriteErrors, say), else the text of the error that
// carries the code.
func (e kafkaCoded) Error() string {
	if _, bare := e.err.(*kerr.Error); bare {
		return e.code.Error()
	}
	return e.err.Error()
}

func (e kafkaCoded) Unwrap() []error { return []error{e.err, e.code} }

// kafkaError makes the Kafka error code in err, if any, match kafka-go's
// kafka.Error too.
func kafkaError(err error) error {
	var ke *kerr.Error
	if err == nil || !errors.As(err, &ke) {
		return err
	}
	var kc kafkaCoded
	if errors.As(err, &kc) {
		return err
	}
	code := kafka.Error(ke.Code)
	if ke == kerr.UnknownTopicID {
		// Requests by topic ID (Kafka 4's) answer this where kafka-go's,
		// by name, get UNKNOWN_TOPIC_OR_PARTITION.
		code = kafka.UnknownTopicOrPartition
	}
	return kafkaCoded{err: err, code: code}
}

// ctxError is the error of a call whose ctx ended while the engine was
// retrying: it matches ctx's error (errors.Is) and nothing else, as
// kafka-go's does, and its text names the last error the engine met.
type ctxError struct {
	ctx  error // context.Cause of the call's ctx
	last error // nil when none since the call began
}

// newCtxError returns ctx's error, naming last when not nil.
func newCtxError(ctx context.Context, last error) error {
	err := context.Cause(ctx)
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = context.Canceled
	}
	var inner *ctxError
	if errors.As(last, &inner) {
		last = inner.last // a retried call's own ctx error: name its cause once
	}
	if last == nil {
		return err
	}
	return &ctxError{ctx: err, last: last}
}

func (e *ctxError) Error() string { return e.ctx.Error() + "; last error: " + e.last.Error() }

func (e *ctxError) Unwrap() error { return e.ctx }

// inCtor is err, a constructor's, with one prefix per line (the
// problems of a configuration are joined, one per line), "sdk: <ctor>: "
// ("sdk: " for ctor ""): the package and constructor prefixes inside its
// text (sdk's own, azdetect's) are dropped; errors.Is and errors.As still
// see err.
func inCtor(ctor string, err error) error {
	lines := strings.Split(err.Error(), "\n")
	for i, msg := range lines {
		for {
			trimmed := strings.TrimPrefix(strings.TrimPrefix(msg, "sdk: "), "azdetect: ")
			if ctor != "" {
				trimmed = strings.TrimPrefix(trimmed, ctor+": ")
			}
			if trimmed == msg {
				break
			}
			msg = trimmed
		}
		if ctor != "" {
			msg = ctor + ": " + msg
		}
		lines[i] = "sdk: " + msg
	}
	return &ctorError{msg: strings.Join(lines, "\n"), err: err}
}

type ctorError struct {
	msg string
	err error
}

func (e *ctorError) Error() string { return e.msg }

func (e *ctorError) Unwrap() error { return e.err }

// handshakeError is a TLS handshake that failed before its ctx ended: the
// broker closed it, or answered with what TLS refuses.
type handshakeError struct {
	addr   string
	err    error
	closed bool // the broker closed the connection
}

func (e *handshakeError) Error() string {
	if e.closed {
		return "sdk: TLS handshake with " + e.addr + ": the broker closed the connection; is this port a plaintext listener? (then leave TLS unset): " + e.err.Error()
	}
	return "sdk: TLS handshake with " + e.addr + ": " + e.err.Error()
}

func (e *handshakeError) Unwrap() error { return e.err }

// errClosed is the error of a message Close gave up on: its wait timed
// out, so it matches context.DeadlineExceeded, as kafka-go's error of a
// write whose last attempt timed out does.
var errClosed = fmt.Errorf("sdk: the Writer was closed before the message was acknowledged (Close waits at most kafka.Writer.WriteTimeout, 10s by default): %w", context.DeadlineExceeded)

// refusesProducerID reports whether err is the cluster's answer that it
// gives this client no producer ID (Kafka 4.x wants IdempotentWrite on the
// cluster or Write on a topic), or cannot produce idempotently.
// Connection errors and timeouts are not: they say nothing about the
// cluster's will.
func refusesProducerID(err error) bool {
	var ke kafka.Error
	if !errors.As(err, &ke) {
		return false
	}
	switch ke {
	case kafka.ClusterAuthorizationFailed, kafka.TransactionalIDAuthorizationFailed, kafka.UnsupportedForMessageFormat:
		return true
	}
	return false
}

var errGroupOnly = errors.New("unavailable when GroupID is set")

// commitError is a partition's error in a commit's response.
type commitError struct {
	topic string
	err   error
}

func (e *commitError) Error() string { return e.err.Error() }

func (e *commitError) Unwrap() error { return e.err }

// The errors of a transaction (TxnWriter, Processor), matched with
// errors.Is; each wraps the cluster's or the engine's error. After any of
// them but ErrTxnFenced and ErrTxnUnsupported the transaction is aborted
// (nothing of it is visible to read_committed readers) and the next one
// can begin.
var (
	// ErrTxnFenced: another instance took the transactional ID (its
	// restart, or a duplicate), or, for a Processor, the group moved the
	// partitions to another member while this one was stopped: this
	// instance is a zombie. Nothing more can be committed with it: Close
	// it (a new one with the same ID fences the other).
	ErrTxnFenced = errors.New("sdk: transaction fenced: another producer took the transactional ID or the group's partitions")
	// ErrTxnAborted: the transaction was aborted, by Abort, or because a
	// write or the commit failed; the error wraps the cause. A
	// Processor's input is read again from the group's committed offsets.
	ErrTxnAborted = errors.New("sdk: transaction aborted")
	// ErrTxnRebalanced: a Processor's group rebalanced before the commit,
	// so the transaction was aborted (also matches ErrTxnAborted): its
	// input goes to the partitions' owner, which reads it again. Not a
	// failure; Run goes on.
	ErrTxnRebalanced = fmt.Errorf("%w by a rebalance of the group", ErrTxnAborted)
	// ErrTxnTimedOut: the transaction was open longer than its timeout
	// (WithTransactionTimeout), so the cluster aborted it (also matches
	// ErrTxnAborted).
	ErrTxnTimedOut = fmt.Errorf("%w: open longer than the transaction timeout", ErrTxnAborted)
	// ErrTxnCoordinator: the transaction coordinator could not be reached
	// or moved while the transaction ended, past the retries (also
	// matches ErrTxnAborted when the abort went through).
	ErrTxnCoordinator = errors.New("sdk: transaction coordinator unavailable or moved")
	// ErrTxnUnknown: the cluster's answer to a commit never came (ctx
	// ended, the connection to the coordinator closed past the retries):
	// the transaction may have been committed or not. What is left of it
	// is aborted (an abort that fails is tried again by a TxnWriter's next
	// Begin). A Processor stops (FetchMessages and Run return this error):
	// it cannot tell from which offsets to read on without reading the
	// group's again. Close it and start another with the same
	// transactional ID, which reads on from what the cluster committed.
	ErrTxnUnknown = errors.New("sdk: the transaction's outcome is unknown: its commit got no answer")
	// ErrTxnUnsupported: the cluster does not support transactions (too
	// old, or a topic kind without them, e.g. WarpStream's lightning
	// topics).
	ErrTxnUnsupported = errors.New("sdk: the cluster does not support transactions")
	// ErrNoTxn: WriteMessages, Commit or Abort outside a transaction.
	ErrNoTxn = errors.New("sdk: no transaction is open: call Begin first")
)

// txnError classifies err, met by op of a transaction begun at began
// whose timeout is timeout; aborted says whether the transaction is
// known to be aborted.
func txnError(op string, err error, began time.Time, timeout time.Duration, aborted bool) error {
	var kind error
	switch {
	case errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch), errors.Is(err, kerr.FencedInstanceID):
		kind = ErrTxnFenced
	case errors.Is(err, kerr.UnsupportedVersion), errors.Is(err, kerr.UnsupportedForMessageFormat):
		kind = ErrTxnUnsupported
	case aborted && !began.IsZero() && time.Since(began) > timeout:
		kind = ErrTxnTimedOut
	case errors.Is(err, kerr.CoordinatorNotAvailable), errors.Is(err, kerr.NotCoordinator), errors.Is(err, kerr.CoordinatorLoadInProgress):
		if aborted {
			return fmt.Errorf("sdk: %s: %w: %w: %w", op, ErrTxnAborted, ErrTxnCoordinator, err)
		}
		kind = ErrTxnCoordinator
	case aborted:
		kind = ErrTxnAborted
	default:
		return fmt.Errorf("sdk: %s: %w", op, err)
	}
	return fmt.Errorf("sdk: %s: %w: %w", op, kind, err)
}

// ErrNotOwned is returned (wrapped) by Seek for a partition the Reader
// does not consume: in group mode, one the group has not assigned it (or
// has taken away); in partition mode, any but its own.
var ErrNotOwned = errors.New("the Reader does not own the partition")

// topicNotReady reports whether a topic's error in a Metadata response
// means "ask again": retriable, but not UNKNOWN_TOPIC_OR_PARTITION, which
// kafka-go returns at once.
func topicNotReady(err error) bool {
	return kerr.IsRetriable(err) && !errors.Is(err, kerr.UnknownTopicOrPartition)
}

// isUnknownTopic reports whether err says the cluster has no such topic
// (by name or ID).
func isUnknownTopic(err error) bool {
	return errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID)
}

func isGenerationChange(err error) bool {
	return errors.Is(err, kerr.RebalanceInProgress) ||
		errors.Is(err, kerr.IllegalGeneration) ||
		errors.Is(err, kerr.UnknownMemberID) ||
		errors.Is(err, kerr.StaleMemberEpoch) ||
		errors.Is(err, kerr.FencedMemberEpoch)
}

// errorType names the class of err for a Recorder: the Kafka error's name,
// else one of a few fixed words (see metrics.Recorder.Absorbed); "" for
// nil.
func errorType(err error) string {
	if err == nil {
		return ""
	}
	var ke *kerr.Error
	var cve *tls.CertificateVerificationError
	var ne net.Error
	switch {
	case errors.As(err, &ke):
		return ke.Message
	case errors.Is(err, kgo.ErrRecordTimeout):
		return "delivery_timeout"
	case errors.Is(err, frameguard.ErrRefused):
		return "bad_response"
	case errors.As(err, &cve):
		return "tls"
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection_refused"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED):
		return "connection_closed"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, kgo.ErrClientClosed):
		return "client_closed"
	}
	return "_OTHER"
}
