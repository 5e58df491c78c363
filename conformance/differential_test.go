//go:build conformance

package conformance

import (
	"runtime"
	"testing"

	"github.com/azkafka/azkafka/internal/testkit/difftest"
	"github.com/azkafka/azkafka/sdk"
)

// TestDifferential runs every scenario of the differential harness
// through kafka-go's clients and the SDK's on the real broker, and fails
// on any difference not in the table of intended differences (the sdk
// package doc's "Differences from kafka-go"), then the property scenarios
// (DIFFTEST_SEED and DIFFTEST_CASES pick others than CI's).
func TestDifferential(t *testing.T) {
	addrs := brokers(t)
	f := difftest.SDKFactory(sdk.WithAZ("az-a"), sdk.WithGetenv(func(string) string { return "" }))
	seed, n := difftest.PropertyInputs(t, 6)
	// As many scenarios at once as go test's default -parallel, whatever
	// run.sh passes for the lanes (see clusterLane).
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	for _, sc := range append(difftest.Scenarios(), difftest.Properties(seed, n)...) {
		if sc.EmbeddedOnly {
			continue
		}
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			slots <- struct{}{}
			defer func() { <-slots }()
			difftest.Run(t, difftest.Shared(addrs), sc, f)
		})
	}
}
