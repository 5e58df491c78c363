//go:build conformance

package conformance

import (
	"os"
	"strings"
	"testing"
)

// brokers returns the real broker's bootstrap addresses, which
// conformance/run.sh exports as AZKAFKA_CONFORMANCE_BROKERS. Without it the
// test is skipped, except under CI=true, where a missing broker fails.
func brokers(t testing.TB) []string {
	t.Helper()
	v := os.Getenv("AZKAFKA_CONFORMANCE_BROKERS")
	if v == "" {
		missing(t, "AZKAFKA_CONFORMANCE_BROKERS is not set: run `make conformance`, which starts a real Kafka 4.3.1 broker")
	}
	return strings.Split(v, ",")
}

// missing reports a missing prerequisite: a failure under CI=true, a skip
// otherwise.
func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}
