// Package envcheck knows every AZKAFKA_* environment variable the project
// reads, so that a misspelled one is reported instead of silently
// ignored.
package envcheck

import (
	"slices"
	"strings"
)

// Prefix is what every variable of the project begins with.
const Prefix = "AZKAFKA_"

// The AZKAFKA_* variables each package of the project reads. Each
// package's test checks that its own variables are listed.
var (
	SDK = []string{
		"AZKAFKA_CLIENT_ID", "AZKAFKA_SESSION_ID", "AZKAFKA_INTERZONE_LB",
		"AZKAFKA_MAX_CONN_RATE", "AZKAFKA_MAX_CONN_BURST",
		"AZKAFKA_REDIAL_BACKOFF_MIN", "AZKAFKA_REDIAL_BACKOFF_MAX",
		"AZKAFKA_RETRY_MAX_ATTEMPTS", "AZKAFKA_RETRY_BACKOFF_MIN", "AZKAFKA_RETRY_BACKOFF_MAX",
		"AZKAFKA_IDEMPOTENCE", "AZKAFKA_RACK_AWARE_PARTITIONING", "AZKAFKA_FETCH_FROM_FOLLOWER",
		"AZKAFKA_GROUP_PROTOCOL", "AZKAFKA_MAX_RESPONSE_BYTES",
	}
	Azdetect = []string{
		"AZKAFKA_AZ", "AZKAFKA_AZ_FORMAT", "AZKAFKA_DETECT_PROVIDERS", "AZKAFKA_DETECT_TIMEOUT",
		"AZKAFKA_AZURE_IMDS_ENDPOINT", "AZKAFKA_K8S_TOKEN_FILE", "AZKAFKA_K8S_CA_FILE",
	}
	IQ  = []string{"AZKAFKA_IQ_ALLOW_STANDBY", "AZKAFKA_IQ_MAX_LAG", "AZKAFKA_IQ_AZ_TAG"}
	CLI = []string{"AZKAFKA_SASL_PASSWORD"}
)

// Known is every variable of the lists above.
var Known = slices.Concat(SDK, Azdetect, IQ, CLI)

// testPrefix marks the variables of the project's own test suites, which
// are not settings of the SDK.
const testPrefix = "AZKAFKA_CONFORMANCE_"

// Unknown is one AZKAFKA_* variable of the environment that no package
// reads.
type Unknown struct {
	Name string
	// Closest is the known variable nearest to Name in edit distance,
	// "" when none is close (more than a third of Name's length away).
	Closest string
}

// Check returns the AZKAFKA_* variables of environ (os.Environ's form,
// NAME=value) that are not Known, in environ's order.
func Check(environ []string) []Unknown {
	var out []Unknown
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, Prefix) || strings.HasPrefix(name, testPrefix) || slices.Contains(Known, name) {
			continue
		}
		out = append(out, Unknown{Name: name, Closest: closest(name)})
	}
	return out
}

func closest(name string) string {
	best, bestD := "", len(name)/3+1
	for _, k := range Known {
		if d := distance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
