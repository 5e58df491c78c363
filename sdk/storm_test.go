package sdk_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/embedded"
	"github.com/azkafka/azkafka/internal/kproxy"
	"github.com/azkafka/azkafka/retry"
	"github.com/azkafka/azkafka/sdk"
	"github.com/segmentio/kafka-go"
)

// stormResult is what one reconnect storm produced.
type stormResult struct {
	redials []time.Duration // accept times of new connections after the close, from the close
	elapsed time.Duration   // until every client had a working connection again
	stats   sdk.ConnStats   // summed over the clients (zero for raw kafka-go)
}

// runStorm connects n kafka.Clients through one proxy, closes every
// connection at the same instant, and has every client retry at once until
// it is served again, as busy producers and consumers would. newTransport
// gives each client its Transport.
func runStorm(t *testing.T, n int, newTransport func() *kafka.Transport) stormResult {
	t.Helper()
	c := embedded.StartT(t, embedded.Topic("storm", 1))
	p, err := kproxy.Start(c.Addrs()[0])
	if err != nil {
		t.Fatal(err)
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

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	transports := make([]*kafka.Transport, n)
	clients := make([]*kafka.Client, n)
	for i := range clients {
		transports[i] = newTransport()
		clients[i] = &kafka.Client{Addr: kafka.TCP(p.Addr()), Transport: transports[i], Timeout: 30 * time.Second}
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
				t.Fatalf("client %d: %v", i, err)
			}
		}
	}
	// ApiVersions always goes to the broker (the Transport answers
	// Metadata from its cache).
	metadata := func(i int) error {
		_, err := clients[i].ApiVersions(ctx, &kafka.ApiVersionsRequest{})
		return err
	}
	each(metadata)          // connect
	time.Sleep(time.Second) // let the connection-rate limiter refill

	mu.Lock()
	accepts = accepts[:0]
	mu.Unlock()
	t0 := time.Now()
	p.CloseAll()
	// Every client retries at once, without a backoff of its own: whatever
	// spreads the re-dials is the dial policy.
	each(func(i int) error {
		var err error
		for range 50 {
			if err = metadata(i); err == nil || !retry.IsTransient(err) {
				return err
			}
		}
		return fmt.Errorf("still failing after 50 tries: %w", err)
	})
	res := stormResult{elapsed: time.Since(t0)}
	mu.Lock()
	for _, a := range accepts {
		res.redials = append(res.redials, a.Sub(t0))
	}
	mu.Unlock()
	slices.Sort(res.redials)
	for _, tr := range transports {
		if st, ok := sdk.TransportConnStats(tr); ok {
			res.stats.Dials += st.Dials
			res.stats.ConnectionsCreated += st.ConnectionsCreated
			res.stats.PeerCloses += st.PeerCloses
			res.stats.EarlyCloses += st.EarlyCloses
			res.stats.LimiterWait += st.LimiterWait
			res.stats.BackoffWait += st.BackoffWait
			res.stats.ThrottledTime += st.ThrottledTime
		}
	}
	return res
}

// histogram renders the re-dial times in buckets of width w.
func histogram(ds []time.Duration, w time.Duration) string {
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

// maxInWindow returns the largest number of re-dials within any window of
// length w.
func maxInWindow(ds []time.Duration, w time.Duration) int {
	best, j := 0, 0
	for i := range ds {
		for ds[i]-ds[j] >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

// TestReconnectStorm closes the connections of 50 clients at the same
// instant. With the dial policy, their re-dials spread over time and no
// one-second window holds more than the process-wide limit allows
// (rate·1s + burst); raw kafka-go, the control, re-dials all at once.
func TestReconnectStorm(t *testing.T) {
	const (
		clients = 50
		perSec  = 20.0 // the process-wide limit under test
		burst   = 10
	)
	// Every client is a separate instance (own session, own re-dial
	// state); they share the process-wide limiter for (20/s, 10).
	opts := append(hermetic("us-east-1a"), sdk.WithMaxConnRate(perSec, burst))
	policy := runStorm(t, clients, func() *kafka.Transport {
		tr, err := sdk.NewTransport(nil, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	})
	raw := runStorm(t, clients, func() *kafka.Transport { return &kafka.Transport{} })

	limit := int(perSec) + burst
	t.Logf("reconnect storm, %d clients, all connections closed at t=0", clients)
	t.Logf("raw kafka-go: %d re-dials, %d in the busiest 1s window, %d in the busiest 10ms, all served after %v\n%s",
		len(raw.redials), maxInWindow(raw.redials, time.Second), maxInWindow(raw.redials, 10*time.Millisecond), raw.elapsed.Round(time.Millisecond),
		histogram(raw.redials, 100*time.Millisecond))
	t.Logf("sdk policy (limit %v/s, burst %d, re-dial jitter 0-50ms): %d re-dials, %d in the busiest 1s window (limit %d), %d in the busiest 10ms, all served after %v\n%s",
		perSec, burst, len(policy.redials), maxInWindow(policy.redials, time.Second), limit,
		maxInWindow(policy.redials, 10*time.Millisecond), policy.elapsed.Round(time.Millisecond),
		histogram(policy.redials, 100*time.Millisecond))
	t.Logf("sdk ConnStats summed over the clients: %+v", policy.stats)

	if len(policy.redials) < clients {
		t.Fatalf("%d re-dials for %d clients", len(policy.redials), clients)
	}
	// The limiter grants slots, the proxy stamps accepts: a goroutine that
	// wakes or is accepted late (the race detector, a shared CPU) shifts its
	// stamp and can pull dials into a window. +3 allows 100 ms of such skew
	// at 20/s; raw kafka-go, below, exceeds the limit by 20.
	if got := maxInWindow(policy.redials, time.Second); got > limit+3 {
		t.Errorf("%d re-dials within one second, the limit allows %d", got, limit)
	}
	// Beyond the burst, dials come at the rate: the storm must last at
	// least (n-burst)/rate, minus the skew.
	minSpan := time.Duration(float64(len(policy.redials)-burst-1) / perSec * float64(time.Second))
	if span := policy.redials[len(policy.redials)-1] - policy.redials[0]; span < minSpan*9/10 {
		t.Errorf("re-dials span %v, want at least %v", span, minSpan)
	}
	if got := maxInWindow(policy.redials, 10*time.Millisecond); got > burst+3 { // same skew allowance
		t.Errorf("%d re-dials within 10ms, more than the burst of %d", got, burst)
	}
	if policy.stats.LimiterWait <= 0 || policy.stats.PeerCloses < clients {
		t.Errorf("stats %+v: want limiter waits and a peer close per client", policy.stats)
	}
	// The control shows that the checks above can fail: without the
	// policy, the re-dials break the limit.
	if got := maxInWindow(raw.redials, time.Second); got <= limit+3 {
		t.Errorf("raw kafka-go re-dialed only %d times in its busiest second: the storm did not happen", got)
	}
}
