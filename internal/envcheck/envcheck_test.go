package envcheck_test

import (
	"reflect"
	"testing"

	"github.com/azkafka/azkafka/internal/envcheck"
	_ "github.com/azkafka/azkafka/sdk" // registers the tables of sdk and azdetect
)

func TestCheck(t *testing.T) {
	got := envcheck.Check([]string{
		"PATH=/bin",
		"AZKAFKA_AZ=us-east-1a",
		"AZKAFKA_IDEMPOTANCE=false",
		"AZKAFKA_CONFORMANCE_BROKERS=127.0.0.1:9092",
		"AZKAFKA_SOMETHING_ELSE_ENTIRELY=1",
		"AZKAFKA_MAX_CONN_RAT=5",
	})
	want := []envcheck.Unknown{
		{Name: "AZKAFKA_IDEMPOTANCE", Closest: "AZKAFKA_IDEMPOTENCE"},
		{Name: "AZKAFKA_SOMETHING_ELSE_ENTIRELY"},
		{Name: "AZKAFKA_MAX_CONN_RAT", Closest: "AZKAFKA_MAX_CONN_RATE"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Check = %+v, want %+v", got, want)
	}
}

func TestKnownHasNoDuplicates(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range envcheck.Known() {
		if seen[k] {
			t.Errorf("%s listed twice", k)
		}
		seen[k] = true
	}
}
