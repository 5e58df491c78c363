package sdk

import (
	"testing"
	"time"
)

// TestHoldGoesOnWhileCallersCome walks a hold after a wave that took 8 ms
// check by check: it lasts a quarter of the round trip whether or not
// callers come, then goes on only while each check finds a caller come
// since the last, and never past the round trip. Hundreds of callers
// come back over about a round trip; a hold cut at a quarter of it sent
// most of them one wave later.
func TestHoldGoesOnWhileCallersCome(t *testing.T) {
	step, least, most := holdFor(8 * time.Millisecond)
	if step != 500*time.Microsecond || least != 2*time.Millisecond || most != 8*time.Millisecond {
		t.Fatalf("holdFor(8ms) = %v, %v, %v; want a check every 500µs, at least 2ms, at most 8ms", step, least, most)
	}
	tests := []struct {
		name string
		// came[i] is how many callers came before check i+1, made at
		// (i+1)*step.
		came []int
		// checks is how many checks the hold makes: its last one ends it.
		checks int
	}{
		{"no caller comes: a quarter of the round trip", []int{0, 0, 0, 0, 0, 0, 0, 0}, 4},
		{"callers until 3ms", []int{1, 0, 2, 1, 1, 1, 0, 0, 0, 0}, 7},
		{"callers at every check: the whole round trip", []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 16},
		{"a check without a caller after the quarter ends it", []int{5, 5, 5, 5, 5, 0, 5, 5, 5}, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &lane{step: step, least: least, most: most}
			checks := 0
			for i, n := range tt.came {
				l.calls += n
				checks++
				if !l.holdOn(time.Duration(i+1) * step) {
					break
				}
				l.seen = l.calls
			}
			if checks != tt.checks {
				t.Errorf("the hold made %d checks (ended at %v), want %d", checks, time.Duration(checks)*step, tt.checks)
			}
		})
	}
}

// TestHoldSetForTests: a hold set with gatherHold is that long, one
// check, whether or not callers come.
func TestHoldSetForTests(t *testing.T) {
	gatherHold.Store(int64(time.Millisecond))
	defer gatherHold.Store(0)
	step, least, most := holdFor(time.Hour)
	l := &lane{step: step, least: least, most: most, calls: 3}
	if step != time.Millisecond || l.holdOn(step) {
		t.Errorf("holdFor with gatherHold 1ms: a check every %v, going on after the first: %v", step, l.holdOn(step))
	}
}
