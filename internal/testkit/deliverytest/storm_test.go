package deliverytest

import (
	"testing"
	"time"
)

func TestMaxInWindow(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name string
		ds   []time.Duration
		w    time.Duration
		want int
	}{
		{"none", nil, time.Second, 0},
		{"one", ms(5), time.Second, 1},
		{"all in one window", ms(0, 10, 999), time.Second, 3},
		{"window end is exclusive", ms(0, 1000), time.Second, 1},
		{"busiest window in the middle", ms(0, 1500, 1600, 1700, 2600, 4000), time.Second, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MaxInWindow(tt.ds, tt.w); got != tt.want {
				t.Errorf("MaxInWindow(%v, %v) = %d, want %d", tt.ds, tt.w, got, tt.want)
			}
		})
	}
}

func TestHistogram(t *testing.T) {
	ds := []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 250 * time.Millisecond}
	want := "      0-  100ms   2 ##\n" +
		"    100-  200ms   0 \n" +
		"    200-  300ms   1 #\n"
	if got := Histogram(ds, 100*time.Millisecond); got != want {
		t.Errorf("Histogram =\n%s\nwant\n%s", got, want)
	}
	if got := Histogram(nil, time.Second); got != "  (no re-dials)\n" {
		t.Errorf("Histogram(nil) = %q", got)
	}
}
