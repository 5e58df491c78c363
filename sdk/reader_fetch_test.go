package sdk

import (
	"testing"
	"time"
)

// A Reader's fetches grow past their first 64 KiB only for a caller that
// reads fast: one that found nothing buffered, or got through its records
// in less than fastRecord each.
func TestFetchGrowsForFastCallers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		n        int64
		elapsed  time.Duration
		buffered int64
		want     bool
	}{
		{"caught up with the fetches", 300, time.Second, 0, true},
		{"0.4µs a record, the next response buffered", 300, 120 * time.Microsecond, 300, true},
		{"just under the bound", 300, 300*fastRecord - 1, 1, true},
		{"at the bound", 300, 300 * fastRecord, 1, false},
		{"a commit per message, 50µs a record", 300, 15 * time.Millisecond, 300, false},
		{"one record a second", 1, time.Second, 5, false},
	} {
		if got := fast(tc.n, tc.elapsed, tc.buffered); got != tc.want {
			t.Errorf("%s: fast(%d, %v, %d) = %v, want %v", tc.name, tc.n, tc.elapsed, tc.buffered, got, tc.want)
		}
	}
	// Before the first records nothing is buffered, whatever the caller's
	// pace: the first poll raises nothing.
	if (&Reader{}).readsFast() {
		t.Error("readsFast before any poll returned records")
	}
}
