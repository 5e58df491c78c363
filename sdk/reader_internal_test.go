package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
)

// A context's end that is not the caller's comes from kafka-go's own group
// generation and is retried; the caller's ctx ending never is.
func TestInnerContextEnd(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"generation canceled, caller live", live, fmt.Errorf("initializing: %w", context.Canceled), true},
		{"inner deadline, caller live", live, context.DeadlineExceeded, true},
		{"caller canceled", done, context.Canceled, false},
		{"caller canceled, other error", done, io.EOF, false},
		{"not a context error", live, errors.New("boom"), false},
	} {
		if got := innerContextEnd(tc.ctx, tc.err); got != tc.want {
			t.Errorf("%s: innerContextEnd = %v, want %v", tc.name, got, tc.want)
		}
	}
}
