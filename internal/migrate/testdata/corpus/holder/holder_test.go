package holder

import (
	"context"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
)

func TestEcho(t *testing.T) {
	c := embedded.StartT(t, embedded.Topic("echo", 1))
	cl := New(c.Addrs(), "echo")
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got, err := cl.Echo(ctx, "hello"); err != nil || got != "hello" {
		t.Fatalf("Echo = %q, %v", got, err)
	}
}
