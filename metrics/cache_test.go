package metrics

import (
	"sync"
	"testing"
)

func TestCache(t *testing.T) {
	var c Cache[string, *int]
	builds := 0
	build := func(n int) func() *int { return func() *int { builds++; v := n; return &v } }
	a := c.Get("a", nil, build(1))
	if c.Get("a", nil, build(2)) != a || *a != 1 || builds != 1 {
		t.Fatalf("a second Get built again: %d builds", builds)
	}
	// A stale value is rebuilt, and the other keys are kept.
	b := c.Get("b", nil, build(3))
	a2 := c.Get("a", func(v *int) bool { return *v == 9 }, build(9))
	if *a2 != 9 || c.Get("b", nil, build(4)) != b || builds != 3 {
		t.Fatalf("stale rebuild: a=%d, %d builds", *a2, builds)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Get("c", nil, func() *int { v := 5; return &v })
		}()
	}
	wg.Wait()
	if *c.Get("c", nil, build(6)) != 5 {
		t.Fatal("concurrent Gets lost the first value")
	}
}
