package iq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/azkafka/azkafka/metrics"
)

// Candidates returns, in the order Query tries them, the replicas of key's
// partition that the policy allows, appended to dst; and the Route.
//
// Policy: without standby serving, the active copy only (its instance
// answers for itself whether it can serve). With standby serving: the
// active copy first, unless its known lag exceeds MaxLag (it is restoring);
// then the standbys whose known lag is at most MaxLag, those in the
// caller's AZ before the others, random order among equals. A standby of
// unknown lag is never chosen.
func (c *Client) Candidates(ctx context.Context, store string, key []byte, dst []Replica) (Route, []Replica, error) {
	r, err := c.Route(store, key)
	if err != nil && (r.Partition < 0 || !c.allowStandby) {
		return r, dst, err
	}
	start := len(dst)
	if !c.allowStandby {
		return r, append(dst, *r.Active), nil
	}
	if r.Active != nil && (!r.Active.LagKnown || r.Active.Lag.Lag <= c.maxLag) {
		dst = append(dst, *r.Active)
	}
	az := c.callerAZ(ctx)
	local := len(dst)
	for _, s := range r.Standbys {
		if s.LagKnown && s.Lag.Lag <= c.maxLag && az != "" && s.AZ == az {
			dst = append(dst, s)
		}
	}
	c.shuffle(dst[local:])
	remote := len(dst)
	for _, s := range r.Standbys {
		if s.LagKnown && s.Lag.Lag <= c.maxLag && (az == "" || s.AZ != az) {
			dst = append(dst, s)
		}
	}
	c.shuffle(dst[remote:])
	if len(dst) == start {
		return r, dst, &storeError{store, fmt.Sprintf(" partition %d: %s", r.Partition, c.whyNone(r)), ErrNoReplica}
	}
	return r, dst, nil
}

// whyNone explains why no replica of r passed the policy.
func (c *Client) whyNone(r Route) string {
	var parts []string
	if r.Active == nil {
		parts = append(parts, "no active instance")
	} else {
		parts = append(parts, fmt.Sprintf("active %s lag %d > max %d", r.Active.HostInfo, r.Active.Lag.Lag, c.maxLag))
	}
	if len(r.Standbys) == 0 {
		parts = append(parts, "no standby")
	}
	for _, s := range r.Standbys {
		if !s.LagKnown {
			parts = append(parts, fmt.Sprintf("standby %s lag unknown", s.HostInfo))
		} else {
			parts = append(parts, fmt.Sprintf("standby %s lag %d > max %d", s.HostInfo, s.Lag.Lag, c.maxLag))
		}
	}
	return strings.Join(parts, ", ")
}

func (c *Client) shuffle(rs []Replica) {
	for i := len(rs) - 1; i > 0; i-- {
		j := c.intN(i + 1)
		rs[i], rs[j] = rs[j], rs[i]
	}
}

// callerAZ returns the caller's AZ: the WithAZ option, or azdetect's answer
// asked once.
func (c *Client) callerAZ(ctx context.Context) string {
	c.azOnce.Do(func() {
		dctx, cancel := context.WithTimeout(ctx, c.azDetectTimeout)
		defer cancel()
		res, err := c.azDetect(dctx)
		if err != nil {
			c.logger.Warn("iq: availability zone unknown; replicas are not ordered by zone", "error", err)
			return
		}
		c.az = res.AZ
	})
	return c.az
}

// QueryFunc asks one replica for the key; ctx carries the attempt timeout
// (WithAttemptTimeout). It returns nil on success. Query moves on to the
// next replica after an error that is worth it: ErrNotActive (wrapped),
// which the function returns when the host answers that it is not active
// or is rebalancing; a refused, reset or closed connection; a timeout; and
// any error with a Retriable() bool method that says true, such as a
// *StatusError of 5xx, 429 or 421. Any other error, and the caller's
// cancellation, end the Query.
type QueryFunc func(ctx context.Context, r Replica) error

// Attempt is one replica Query tried and why it failed.
type Attempt struct {
	Replica Replica
	Err     error
}

// QueryError is Query's error: the key's route and every replica tried.
// errors.Is and errors.As see through to each attempt's error.
type QueryError struct {
	Store     string
	Key       string // quoted, truncated
	Partition int
	Attempts  []Attempt
	// Err is the reason Query stopped: the last attempt's error, ctx's
	// error, or why no replica was eligible.
	Err error
}

// Error names the store, key and partition and, for each attempt, the
// replica's role and host and its error, then the stop reason when it is
// not the last attempt's error.
func (e *QueryError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "iq: query store %q key %s partition %d failed", e.Store, e.Key, e.Partition)
	if len(e.Attempts) == 0 {
		fmt.Fprintf(&b, ": %s", strings.TrimPrefix(e.Err.Error(), "iq: "))
		return b.String()
	}
	fmt.Fprintf(&b, " after %d attempt(s):", len(e.Attempts))
	for _, a := range e.Attempts {
		role := "standby"
		if a.Replica.Active {
			role = "active"
		}
		fmt.Fprintf(&b, " [%s %s: %v]", role, a.Replica.HostInfo, a.Err)
	}
	if e.Err != e.Attempts[len(e.Attempts)-1].Err {
		fmt.Fprintf(&b, ": %s", strings.TrimPrefix(e.Err.Error(), "iq: "))
	}
	return b.String()
}

// Unwrap returns the stop reason and every attempt's error.
func (e *QueryError) Unwrap() []error {
	errs := make([]error, 0, len(e.Attempts)+1)
	errs = append(errs, e.Err)
	for _, a := range e.Attempts {
		errs = append(errs, a.Err)
	}
	return errs
}

// Query calls fn for the candidates of key (see Candidates) in order until
// one succeeds, an error is not retriable, MaxAttempts replicas were tried,
// or ctx ends. When every replica tried answered ErrNotActive (the tasks
// are moving), Query re-reads the metadata once (Source.Refresh, forcing
// a poll) and tries the replicas it did not try yet, with a new
// WithMaxAttempts budget. It returns nil or a *QueryError naming every
// replica tried and why it failed.
func (c *Client) Query(ctx context.Context, store string, key []byte, fn QueryFunc) error {
	var start time.Time
	if c.rec != nil {
		start = time.Now()
	}
	qe, answered, ok := c.query(ctx, store, key, fn)
	if c.rec != nil {
		c.recordQuery(ctx, qe, answered, ok, time.Since(start))
	}
	if ok {
		return nil
	}
	return qe
}

// query is Query: it returns the QueryError of what failed, and the
// replica that answered, if one did (ok).
func (c *Client) query(ctx context.Context, store string, key []byte, fn QueryFunc) (qe *QueryError, answered Replica, ok bool) {
	var buf [8]Replica
	r, cands, err := c.Candidates(ctx, store, key, buf[:0])
	qe = &QueryError{Store: store, Key: quote(string(key)), Partition: r.Partition}
	if err != nil {
		qe.Err = err
		return qe, Replica{}, false
	}
	if answered, ok = c.try(ctx, store, cands, fn, qe); ok {
		return qe, answered, true
	}
	if !allNotActive(qe) || ctx.Err() != nil {
		return qe, Replica{}, false
	}
	before := c.src.snapshot()
	if err := c.src.Refresh(ctx); err != nil {
		qe.Err = fmt.Errorf("every replica answered not active, and re-reading the metadata failed: %w", err)
		return qe, Replica{}, false
	}
	if c.src.snapshot() == before { // nothing new (a static source): no new budget
		qe.Err = fmt.Errorf("every replica answered not active, and the re-read metadata names no other (the hand-over is not visible yet): %w", qe.Err)
		return qe, Replica{}, false
	}
	r, cands, err = c.Candidates(ctx, store, key, buf[:0])
	if err != nil {
		qe.Err = fmt.Errorf("every replica answered not active; after re-reading the metadata: %w", err)
		return qe, Replica{}, false
	}
	qe.Partition = r.Partition
	fresh := cands[:0]
	for _, rep := range cands {
		if !triedAs(qe, rep) {
			fresh = append(fresh, rep)
		}
	}
	if len(fresh) == 0 {
		qe.Err = fmt.Errorf("every replica answered not active, and the re-read metadata names no other (the hand-over is not visible yet): %w", qe.Err)
		return qe, Replica{}, false
	}
	answered, ok = c.try(ctx, store, fresh, fn, qe)
	return qe, answered, ok
}

// recordQuery reports a Query that took d to the Recorder.
func (c *Client) recordQuery(ctx context.Context, qe *QueryError, answered Replica, ok bool, d time.Duration) {
	tried := len(qe.Attempts)
	outcome, chosen := metrics.QueryOK, metrics.CopyNone
	switch {
	case ok:
		tried++
		chosen = c.copyOf(ctx, answered)
	case ctx.Err() != nil:
		outcome = metrics.QueryCanceled
	case tried == 0:
		outcome = metrics.QueryNoReplica
	default:
		outcome = metrics.QueryFailed
	}
	if !ok && tried > 0 {
		chosen = c.copyOf(ctx, qe.Attempts[tried-1].Replica)
	}
	c.rec.Queried(qe.Store, outcome, chosen, tried, d)
}

// copyOf says which copy rep is, for metrics.
func (c *Client) copyOf(ctx context.Context, rep Replica) metrics.Copy {
	switch {
	case rep.Active:
		return metrics.CopyActive
	case rep.AZ != "" && rep.AZ == c.callerAZ(ctx):
		return metrics.CopyStandbyInZone
	}
	return metrics.CopyStandbyOtherZone
}

// try calls fn for cands in order, recording failures in qe; it returns
// the replica that answered, if one did.
func (c *Client) try(ctx context.Context, store string, cands []Replica, fn QueryFunc, qe *QueryError) (Replica, bool) {
	for i, rep := range cands {
		if i == c.maxAttempts {
			qe.Err = fmt.Errorf("gave up after %d attempts (WithMaxAttempts)", c.maxAttempts)
			return Replica{}, false
		}
		if err := ctx.Err(); err != nil {
			qe.Err = err
			return Replica{}, false
		}
		actx, cancel := ctx, context.CancelFunc(func() {})
		if c.attemptTimeout > 0 {
			actx, cancel = context.WithTimeout(ctx, c.attemptTimeout)
		}
		err := fn(actx, rep)
		cancel()
		if err == nil {
			return rep, true
		}
		qe.Attempts = append(qe.Attempts, Attempt{Replica: rep, Err: err})
		qe.Err = err
		if ctx.Err() != nil {
			qe.Err = ctx.Err()
			return Replica{}, false
		}
		if !isRetriable(err) {
			return Replica{}, false
		}
		c.logger.Debug("iq: replica failed, trying next", "store", store, "host", rep.HostInfo.String(), "error", err)
	}
	return Replica{}, false
}

func allNotActive(qe *QueryError) bool {
	if len(qe.Attempts) == 0 {
		return false
	}
	for _, a := range qe.Attempts {
		if !errors.Is(a.Err, ErrNotActive) {
			return false
		}
	}
	return true
}

// triedAs reports whether rep's host was already tried in the same role.
func triedAs(qe *QueryError, rep Replica) bool {
	for _, a := range qe.Attempts {
		if a.Replica.HostInfo == rep.HostInfo && a.Replica.Active == rep.Active {
			return true
		}
	}
	return false
}
