package azdetect

import (
	"context"
	"fmt"
	"sync"
)

// cache holds one detection outcome and the detection in flight, if any.
// Concurrent callers share the detection in flight (a small singleflight).
type cache struct {
	mu   sync.Mutex
	seq  uint64 // numbers the calls, so an older call never replaces a newer outcome
	done *call  // the cached outcome, nil before the first completed detection
	run  *call  // the newest detection in flight, or nil
}

// call is one detection; done is closed when res, err and cached are set.
type call struct {
	seq    uint64
	done   chan struct{}
	res    Result
	err    error
	cached bool // false when the leader's ctx ended first: waiters start over
}

// get returns the cached outcome or, if there is none or force is set,
// takes part in a detection: it joins the one in flight or leads a new one
// in its own goroutine, so that no goroutine outlives the call. A failed
// detection cut short by its leader's ctx is not cached and its waiters
// start over.
func (c *cache) get(ctx context.Context, force bool, detect func(context.Context) (Result, error)) (Result, error) {
	for {
		c.mu.Lock()
		if c.done != nil && !force {
			r, err := c.done.res, c.done.err
			c.mu.Unlock()
			return r, err
		}
		if cl := c.run; cl != nil && !force {
			c.mu.Unlock()
			select {
			case <-cl.done:
				if cl.cached {
					return cl.res, cl.err
				}
				continue // the leader gave up: start over, maybe as leader
			case <-ctx.Done():
				return Result{}, fmt.Errorf("%w: %w", ErrNoAZ, ctx.Err())
			}
		}
		c.seq++
		cl := &call{seq: c.seq, done: make(chan struct{})}
		c.run = cl
		c.mu.Unlock()

		cl.res, cl.err = detect(ctx)
		cl.cached = cl.err == nil || ctx.Err() == nil

		c.mu.Lock()
		if cl.cached && (c.done == nil || c.done.seq < cl.seq) {
			c.done = cl
		}
		if c.run == cl {
			c.run = nil
		}
		c.mu.Unlock()
		close(cl.done)
		return cl.res, cl.err
	}
}
