package retry_test

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/azkafka/azkafka/retry"
)

func ExamplePolicy_Do() {
	p := retry.Policy{MaxAttempts: 3, Backoff: retry.Backoff{Min: time.Millisecond, Max: 4 * time.Millisecond}}
	tries := 0
	err := p.Do(context.Background(), func(context.Context) error {
		tries++
		if tries < 3 {
			return io.ErrUnexpectedEOF // e.g. the broker connection dropped mid-response
		}
		return nil
	})
	fmt.Println(tries, err)
	// Output: 3 <nil>
}

func ExampleBackoff_Delay() {
	b := retry.Backoff{Min: 50 * time.Millisecond, Max: time.Second, Rand: func() float64 { return 0.5 }}
	for attempt := range 6 {
		fmt.Println(attempt, b.Ceiling(attempt), b.Delay(attempt))
	}
	// Output:
	// 0 50ms 25ms
	// 1 100ms 50ms
	// 2 200ms 100ms
	// 3 400ms 200ms
	// 4 800ms 400ms
	// 5 1s 500ms
}

func ExampleIsTransient() {
	fmt.Println(retry.IsTransient(fmt.Errorf("fetch: %w", io.EOF)))
	fmt.Println(retry.IsTransient(context.Canceled))
	// Output:
	// true
	// false
}
