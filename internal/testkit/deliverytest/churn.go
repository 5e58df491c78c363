package deliverytest

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/kproxy"
)

// Churn kills connections through a proxy at random, every 100 to 300 ms
// (about every 200 ms): it closes a random live connection, or arms a
// one-shot CloseAfter (the broker handles the request, the client never
// sees the answer) or Reset for the next request of any kind. Its methods
// are safe for concurrent use.
type Churn struct {
	p      *kproxy.Proxy
	armed  atomic.Int32 // a kproxy.Action to apply once, or -1
	kills  atomic.Int64
	byKind [3]atomic.Int64 // closes, armed CloseAfters, armed Resets
	stop   chan struct{}
	done   sync.WaitGroup
}

// StartChurn starts churning p's connections; seed seeds the choices.
// It takes over p's request hook until Stop.
func StartChurn(p *kproxy.Proxy, seed uint64) *Churn {
	c := &Churn{p: p, stop: make(chan struct{})}
	c.armed.Store(-1)
	p.OnRequest(func(kproxy.Request) kproxy.Action {
		if a := c.armed.Swap(-1); a >= 0 {
			c.kills.Add(1)
			return kproxy.Action(a)
		}
		return kproxy.Forward
	})
	rnd := rand.New(rand.NewPCG(seed, seed))
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		for {
			select {
			case <-c.stop:
				return
			case <-time.After(time.Duration(100+rnd.IntN(200)) * time.Millisecond):
			}
			switch kind := rnd.IntN(3); kind {
			case 0:
				if conns := p.Conns(); len(conns) > 0 && p.CloseConn(conns[rnd.IntN(len(conns))].ID) {
					c.kills.Add(1)
					c.byKind[0].Add(1)
				}
			case 1:
				c.armed.Store(int32(kproxy.CloseAfter))
				c.byKind[1].Add(1)
			case 2:
				c.armed.Store(int32(kproxy.Reset))
				c.byKind[2].Add(1)
			}
		}
	}()
	return c
}

// Stop ends the churn, waits for it, and removes the proxy's request hook.
// Call it once.
func (c *Churn) Stop() {
	close(c.stop)
	c.done.Wait()
	c.p.OnRequest(nil)
}

// Kills is the number of connections killed so far: closed, or hit by an
// armed CloseAfter or Reset.
func (c *Churn) Kills() int64 { return c.kills.Load() }

// ByKind counts the churn's choices so far: connections closed, CloseAfters
// armed and Resets armed (an armed action kills only if a request comes).
func (c *Churn) ByKind() (closed, closeAfters, resets int64) {
	return c.byKind[0].Load(), c.byKind[1].Load(), c.byKind[2].Load()
}
