package iq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"

	"github.com/azkafka/azkafka/retry"
)

// errors.go holds the package's errors (those a caller tests with
// errors.Is and errors.As) and its one classification: which error of a
// replica is worth trying the next (isRetriable), over package retry's
// list of transient errors.

// ErrNotAvailable reports that routing metadata is incomplete: no metadata
// has been loaded yet, the store's source topics have no known partition
// count, or no instance is active for the key's partition (Kafka Streams is
// starting or rebalancing). It is Java's KeyQueryMetadata.NOT_AVAILABLE and
// its unknown active host ("unavailable:-1"). Test with errors.Is.
var ErrNotAvailable = errors.New("iq: routing metadata not available")

// ErrUnknownStore reports a store that no instance's metadata mentions
// (Java's queryMetadataForKey returns null for it). Test with errors.Is.
var ErrUnknownStore = errors.New("iq: unknown store")

// ErrStoreTopicsUnknown reports a store known to exist whose source topics
// could not be determined (Metadata.UnmappedStores): Route on it returns
// an error wrapping it that gives the reason and the way out, for
// NewClusterSource WithStoreTopics. Test with errors.Is.
var ErrStoreTopicsUnknown = errors.New("iq: source topics of the store unknown")

// ErrNotActive is what a query function returns (wrapped) when the host
// says it is not active for the key, or its store is not queryable because
// it is rebalancing or restoring (Java's InvalidStateStoreException). Query
// moves on to the next replica.
var ErrNotActive = errors.New("iq: host not active for the key or rebalancing")

// ErrNoReplica reports that the policy found no replica to query. Test with
// errors.Is; it is also ErrNotAvailable.
var ErrNoReplica error = noReplicaError{}

type noReplicaError struct{}

func (noReplicaError) Error() string        { return "iq: no eligible replica" }
func (noReplicaError) Is(target error) bool { return target == ErrNotAvailable }

// StatusError is an HTTP status a host answered with. A query function may
// return it for a status that is not 2xx; 5xx, 429 and 421 are retriable.
// An HTTP source's poll reports a metadata endpoint's status with it too.
type StatusError struct {
	Code int
	// Body is a prefix of the answer, for the error message.
	Body string
}

// Error returns "HTTP <code> <status text>", with the body prefix after a
// colon when there is one.
func (e *StatusError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("HTTP %d %s", e.Code, http.StatusText(e.Code))
	}
	return fmt.Sprintf("HTTP %d %s: %s", e.Code, http.StatusText(e.Code), e.Body)
}

// Retriable reports whether the status is worth another replica.
func (e *StatusError) Retriable() bool {
	return e.Code >= 500 || e.Code == http.StatusTooManyRequests || e.Code == http.StatusMisdirectedRequest
}

// isRetriable reports whether err, returned by one replica, is worth trying
// the next (see QueryFunc): a status or error that says so (Retriable),
// ErrNotActive, package retry's transient errors (the connection closed,
// reset or refused), a timeout, an unreachable host.
func isRetriable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var r interface{ Retriable() bool }
	if errors.As(err, &r) {
		return r.Retriable()
	}
	// The connection errors are package retry's transient ones; a replica
	// that timed out or is down is worth leaving for the next.
	if retry.IsTransient(err) || errors.Is(err, ErrNotActive) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.EHOSTUNREACH) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
