package deliverytest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/retry"
)

// Storm is what one reconnect storm produced.
type Storm struct {
	// Redials are the accept times of the connections made after the
	// close, from the close, sorted.
	Redials []time.Duration
	// Elapsed is the time until every client was served again.
	Elapsed time.Duration
	// Transports are the clients' transports, for their statistics; their
	// idle connections are closed.
	Transports []*kafka.Transport
}

// RunStorm connects n kafka.Clients to backend through one proxy, closes
// every connection at the same instant, and has every client retry at
// once (up to 50 times, without a backoff of its own) until it is served
// again, as busy producers and consumers would: whatever spreads the
// re-dials is the dial policy of the Transport that newTransport gives
// each client. budget bounds the whole storm; each request gets half of
// it. A client that is not served stops the test.
func RunStorm(tb testing.TB, backend string, n int, budget time.Duration, newTransport func() *kafka.Transport) Storm {
	tb.Helper()
	p, err := kproxy.Start(backend)
	if err != nil {
		tb.Fatal(err)
	}
	defer p.Close()
	var mu sync.Mutex
	var accepts []time.Time
	p.OnConnect(func(uint64) kproxy.ConnAction {
		mu.Lock()
		accepts = append(accepts, time.Now())
		mu.Unlock()
		return kproxy.Accept
	})

	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	transports := make([]*kafka.Transport, n)
	clients := make([]*kafka.Client, n)
	for i := range clients {
		transports[i] = newTransport()
		clients[i] = &kafka.Client{Addr: kafka.TCP(p.Addr()), Transport: transports[i], Timeout: budget / 2}
	}
	defer func() {
		for _, tr := range transports {
			tr.CloseIdleConnections()
		}
	}()
	each := func(fn func(i int) error) {
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range clients {
			wg.Go(func() { errs[i] = fn(i) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				tb.Fatalf("client %d: %v", i, err)
			}
		}
	}
	// ApiVersions always goes to the broker (the Transport answers
	// Metadata from its cache).
	apiVersions := func(i int) error {
		_, err := clients[i].ApiVersions(ctx, &kafka.ApiVersionsRequest{})
		return err
	}
	each(apiVersions)       // connect
	time.Sleep(time.Second) // let a connection-rate limiter refill

	mu.Lock()
	accepts = accepts[:0]
	mu.Unlock()
	t0 := time.Now()
	p.CloseAll()
	each(func(i int) error {
		var err error
		for range 50 {
			if err = apiVersions(i); err == nil || !retry.IsTransient(err) {
				return err
			}
		}
		return fmt.Errorf("still failing after 50 tries: %w", err)
	})
	st := Storm{Elapsed: time.Since(t0), Transports: transports}
	mu.Lock()
	for _, a := range accepts {
		st.Redials = append(st.Redials, a.Sub(t0))
	}
	mu.Unlock()
	slices.Sort(st.Redials)
	return st
}

// Histogram renders the sorted durations ds in buckets of width w, one
// line a bucket.
func Histogram(ds []time.Duration, w time.Duration) string {
	if len(ds) == 0 {
		return "  (no re-dials)\n"
	}
	counts := make([]int, int(ds[len(ds)-1]/w)+1)
	for _, d := range ds {
		counts[d/w]++
	}
	var b strings.Builder
	for i, c := range counts {
		fmt.Fprintf(&b, "  %5d-%5dms %3d %s\n", time.Duration(i)*w/time.Millisecond, time.Duration(i+1)*w/time.Millisecond, c, strings.Repeat("#", c))
	}
	return b.String()
}

// MaxInWindow returns the largest number of the sorted durations ds
// within any window of length w.
func MaxInWindow(ds []time.Duration, w time.Duration) int {
	best, j := 0, 0
	for i := range ds {
		for ds[i]-ds[j] >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}
