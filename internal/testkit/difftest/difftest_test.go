package difftest_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/azkafka/azkafka/internal/testkit/difftest"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/sdk"
)

func sdkFactory() difftest.Factory {
	return difftest.SDKFactory(sdk.WithAZ("az-a"), sdk.WithGetenv(func(string) string { return "" }))
}

func TestScenarios(t *testing.T) {
	for _, sc := range difftest.Scenarios() {
		if sc.RealOnly {
			continue
		}
		cluster := difftest.Embedded()
		if sc.AutoCreateTopics {
			cluster = difftest.Embedded(embedded.KfakeOptions(kfake.AllowAutoTopicCreation()))
		}
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			difftest.Run(t, cluster, sc, sdkFactory())
		})
	}
}

// TestProperties runs the property scenarios: DIFFTEST_SEED picks other
// inputs than CI's (and DIFFTEST_CASES how many).
func TestProperties(t *testing.T) {
	seed, n := difftest.PropertyInputs(t, 12)
	for _, sc := range difftest.Properties(seed, n) {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			difftest.Run(t, difftest.Embedded(), sc, sdkFactory())
		})
	}
}
