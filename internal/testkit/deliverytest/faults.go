package deliverytest

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/kproxy"
)

// EveryNth returns a kproxy request hook that applies act to every nth
// request whose API key is in keys, at most limit times, counting the
// faults in injected. Other requests are forwarded. Safe for concurrent
// use, as kproxy calls it.
func EveryNth(n, limit int64, act kproxy.Action, injected *atomic.Int64, keys ...int16) func(kproxy.Request) kproxy.Action {
	var seen atomic.Int64
	return func(r kproxy.Request) kproxy.Action {
		hit := false
		for _, k := range keys {
			hit = hit || r.Key == k
		}
		if !hit || seen.Add(1)%n != 0 || injected.Load() >= limit {
			return kproxy.Forward
		}
		injected.Add(1)
		return act
	}
}

// RefuseConnects twice, 100 ms apart, closes every connection through p
// and makes its port refuse connects for 400 ms: long enough for kafka-go's
// partition reader to exhaust its 3 dial attempts and surface the error.
// Each outage counts one fault in injected. stop ends the outages early
// and waits for them to end.
func RefuseConnects(p *kproxy.Proxy, injected *atomic.Int64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 2; i++ {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			p.SetRefusing(true)
			p.CloseAll()
			injected.Add(1)
			time.Sleep(400 * time.Millisecond)
			p.SetRefusing(false)
		}
	}()
	return func() { close(done); wg.Wait(); p.SetRefusing(false) }
}

// Every runs fn every d, on its own goroutine, until stop is called; stop
// waits for a running fn to return.
func Every(d time.Duration, fn func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(d)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				fn()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
