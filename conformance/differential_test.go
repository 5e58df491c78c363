//go:build conformance

package conformance

import (
	"testing"

	"github.com/azkafka/azkafka/internal/testkit/difftest"
	"github.com/azkafka/azkafka/sdk"
)

// TestDifferential runs every scenario of the differential harness
// through kafka-go's clients and the SDK's on the real broker, and fails
// on any difference not in the table of intended differences (the sdk
// package doc's "Differences from kafka-go").
func TestDifferential(t *testing.T) {
	addrs := brokers(t)
	f := difftest.SDKFactory(sdk.WithAZ("az-a"), sdk.WithGetenv(func(string) string { return "" }))
	for _, sc := range difftest.Scenarios() {
		if sc.EmbeddedOnly {
			continue
		}
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			difftest.Run(t, difftest.Shared(addrs), sc, f)
		})
	}
}
