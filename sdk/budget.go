package sdk

// budget.go counts each message's delivery budget from when it was handed
// to the Writer, never from its Time: the engine fails a record whose
// Context has ended (when the record is first in its partition), so the
// Writer gives each record a Context that ends a budget after hand-over.

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// budgetTick is how long the records handed over share one budget
// Context: a record is failed no sooner than its budget after hand-over,
// and at most budgetTick later. One timer per tick, not per record.
const budgetTick = 100 * time.Millisecond

// budgetClock hands out the Contexts that end the records' delivery
// budgets. Safe for concurrent use.
type budgetClock struct {
	budget time.Duration
	mu     sync.Mutex
	cur    atomic.Pointer[budgetSlot]
	// live are the slots whose Context has not ended, oldest first, so
	// that stop can release them.
	live []*budgetSlot
}

type budgetSlot struct {
	until  int64 // hand-overs before this (unix nanoseconds) share ctx
	ctx    context.Context
	cancel context.CancelFunc
}

// ctx returns the budget Context of a record handed over at now.
func (b *budgetClock) ctx(now time.Time) context.Context {
	n := now.UnixNano()
	if s := b.cur.Load(); s != nil && n < s.until {
		return s.ctx
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.cur.Load(); s != nil && n < s.until {
		return s.ctx
	}
	until := now.Add(budgetTick)
	ctx, cancel := context.WithDeadline(context.Background(), until.Add(b.budget))
	s := &budgetSlot{until: until.UnixNano(), ctx: ctx, cancel: cancel}
	// Drop the slots whose Context ended: their timers have fired.
	i := 0
	for i < len(b.live) && b.live[i].ctx.Err() != nil {
		i++
	}
	b.live = append(b.live[i:], s)
	b.cur.Store(s)
	return ctx
}

// stop ends every budget Context, releasing their timers.
func (b *budgetClock) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.live {
		s.cancel()
	}
	b.live = nil
}
