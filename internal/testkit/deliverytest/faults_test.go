package deliverytest

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/kproxy"
)

func TestEveryNth(t *testing.T) {
	tests := []struct {
		name     string
		n, limit int64
		keys     []int16
		requests []int16 // API keys, in order
		want     []kproxy.Action
	}{
		{"every 2nd produce", 2, 10, []int16{0}, []int16{0, 0, 0, 0},
			[]kproxy.Action{kproxy.Forward, kproxy.Reset, kproxy.Forward, kproxy.Reset}},
		{"other keys are not counted", 2, 10, []int16{0}, []int16{0, 1, 3, 0, 1, 0},
			[]kproxy.Action{kproxy.Forward, kproxy.Forward, kproxy.Forward, kproxy.Reset, kproxy.Forward, kproxy.Forward}},
		{"several keys", 3, 10, []int16{1, 8}, []int16{1, 8, 1, 12, 8, 8, 1},
			[]kproxy.Action{kproxy.Forward, kproxy.Forward, kproxy.Reset, kproxy.Forward, kproxy.Forward, kproxy.Forward, kproxy.Reset}},
		{"at most limit", 1, 2, []int16{0}, []int16{0, 0, 0, 0},
			[]kproxy.Action{kproxy.Reset, kproxy.Reset, kproxy.Forward, kproxy.Forward}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var injected atomic.Int64
			hook := EveryNth(tt.n, tt.limit, kproxy.Reset, &injected, tt.keys...)
			wantInjected := int64(0)
			for i, k := range tt.requests {
				if got := hook(kproxy.Request{Key: k}); got != tt.want[i] {
					t.Errorf("request %d (key %d): %v, want %v", i, k, got, tt.want[i])
				}
				if tt.want[i] != kproxy.Forward {
					wantInjected++
				}
			}
			if injected.Load() != wantInjected {
				t.Errorf("injected = %d, want %d", injected.Load(), wantInjected)
			}
		})
	}
}

func TestEveryRunsUntilStopped(t *testing.T) {
	var calls atomic.Int64
	stop := Every(time.Millisecond, func() { calls.Add(1) })
	for calls.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	stop()
	after := calls.Load()
	time.Sleep(20 * time.Millisecond)
	if got := calls.Load(); got != after {
		t.Fatalf("fn ran %d more times after stop returned", got-after)
	}
}
