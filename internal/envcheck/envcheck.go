// Package envcheck knows every AZKAFKA_* environment variable the project
// reads, so that a misspelled one is reported instead of silently
// ignored.
package envcheck

import (
	"slices"
	"strings"

	"github.com/azkafka/azkafka/internal/settings"
)

// Prefix is what every variable of the project begins with.
const Prefix = "AZKAFKA_"

// The AZKAFKA_* variables of the packages a program built on the SDK may
// not link, iq and the azkafka command: always known, so that a variable
// meant for another program sharing the environment is not called
// misspelled. Each of those packages' tests checks its own list against
// its table. The variables of sdk and azdetect, which every such program
// links, come from their tables (settings.Register).
var (
	IQ  = []string{"AZKAFKA_IQ_ALLOW_STANDBY", "AZKAFKA_IQ_MAX_LAG", "AZKAFKA_IQ_AZ_TAG"}
	CLI = []string{"AZKAFKA_SASL_PASSWORD"}
)

// Known returns every AZKAFKA_* variable known: those of the tables
// registered with package settings, IQ and CLI.
func Known() []string {
	var known []string
	for _, e := range settings.Entries() {
		if strings.HasPrefix(e.Name, Prefix) {
			known = append(known, e.Name)
		}
	}
	for _, n := range slices.Concat(IQ, CLI) {
		if !slices.Contains(known, n) {
			known = append(known, n)
		}
	}
	return known
}

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
	var known []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, Prefix) || strings.HasPrefix(name, testPrefix) {
			continue
		}
		if known == nil {
			known = Known()
		}
		if !slices.Contains(known, name) {
			out = append(out, Unknown{Name: name, Closest: closest(name, known)})
		}
	}
	return out
}

func closest(name string, known []string) string {
	best, bestD := "", len(name)/3+1
	for _, k := range known {
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
