package sdk_test

import (
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/sdk"
	"github.com/segmentio/kafka-go"
)

// stormResult is what one reconnect storm produced.
type stormResult struct {
	redials []time.Duration // accept times of new connections after the close, from the close
	elapsed time.Duration   // until every client had a working connection again
	stats   sdk.ConnStats   // summed over the clients (zero for raw kafka-go)
}

// runStorm runs deliverytest.RunStorm with n clients against a fresh
// embedded broker and sums the clients' sdk connection statistics.
func runStorm(t *testing.T, n int, newTransport func() *kafka.Transport) stormResult {
	t.Helper()
	c := embedded.StartT(t, embedded.Topic("storm", 1))
	st := deliverytest.RunStorm(t, c.Addrs()[0], n, 60*time.Second, newTransport)
	res := stormResult{redials: st.Redials, elapsed: st.Elapsed}
	for _, tr := range st.Transports {
		if cs, ok := sdk.TransportConnStats(tr); ok {
			res.stats.Dials += cs.Dials
			res.stats.ConnectionsCreated += cs.ConnectionsCreated
			res.stats.PeerCloses += cs.PeerCloses
			res.stats.EarlyCloses += cs.EarlyCloses
			res.stats.LimiterWait += cs.LimiterWait
			res.stats.BackoffWait += cs.BackoffWait
			res.stats.ThrottledTime += cs.ThrottledTime
		}
	}
	return res
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
		len(raw.redials), deliverytest.MaxInWindow(raw.redials, time.Second), deliverytest.MaxInWindow(raw.redials, 10*time.Millisecond), raw.elapsed.Round(time.Millisecond),
		deliverytest.Histogram(raw.redials, 100*time.Millisecond))
	t.Logf("sdk policy (limit %v/s, burst %d, re-dial jitter 0-50ms): %d re-dials, %d in the busiest 1s window (limit %d), %d in the busiest 10ms, all served after %v\n%s",
		perSec, burst, len(policy.redials), deliverytest.MaxInWindow(policy.redials, time.Second), limit,
		deliverytest.MaxInWindow(policy.redials, 10*time.Millisecond), policy.elapsed.Round(time.Millisecond),
		deliverytest.Histogram(policy.redials, 100*time.Millisecond))
	t.Logf("sdk ConnStats summed over the clients: %+v", policy.stats)

	if len(policy.redials) < clients {
		t.Fatalf("%d re-dials for %d clients", len(policy.redials), clients)
	}
	// The limiter grants slots, the proxy stamps accepts: a goroutine that
	// wakes or is accepted late (the race detector, a shared CPU) shifts its
	// stamp and can pull dials into a window. +3 allows 100 ms of such skew
	// at 20/s; raw kafka-go, below, exceeds the limit by 20.
	if got := deliverytest.MaxInWindow(policy.redials, time.Second); got > limit+3 {
		t.Errorf("%d re-dials within one second, the limit allows %d", got, limit)
	}
	// Beyond the burst, dials come at the rate: the storm must last at
	// least (n-burst)/rate, minus the skew.
	minSpan := time.Duration(float64(len(policy.redials)-burst-1) / perSec * float64(time.Second))
	if span := policy.redials[len(policy.redials)-1] - policy.redials[0]; span < minSpan*9/10 {
		t.Errorf("re-dials span %v, want at least %v", span, minSpan)
	}
	if got := deliverytest.MaxInWindow(policy.redials, 10*time.Millisecond); got > burst+3 { // same skew allowance
		t.Errorf("%d re-dials within 10ms, more than the burst of %d", got, burst)
	}
	if policy.stats.LimiterWait <= 0 || policy.stats.PeerCloses < clients {
		t.Errorf("stats %+v: want limiter waits and a peer close per client", policy.stats)
	}
	// The control shows that the checks above can fail: without the
	// policy, the re-dials break the limit.
	if got := deliverytest.MaxInWindow(raw.redials, time.Second); got <= limit+3 {
		t.Errorf("raw kafka-go re-dialed only %d times in its busiest second: the storm did not happen", got)
	}
}
