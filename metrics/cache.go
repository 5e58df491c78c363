package metrics

import (
	"sync"
	"sync/atomic"
)

// Cache maps the few, long-lived keys a Recorder meets on every event
// (brokers, topics) to what it built for them: lookups take no lock, and
// each new key copies the map. The zero value is empty and ready; a Cache
// is safe for concurrent use.
type Cache[K comparable, V any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[K]V]
}

// Get returns the value of k, or, when there is none or current reports
// that the stored one is stale (nil: never), stores and returns build().
// build runs under the Cache's lock.
func (c *Cache[K, V]) Get(k K, current func(V) bool, build func() V) V {
	if v, ok := c.lookup(k, current); ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.lookup(k, current); ok {
		return v
	}
	next := map[K]V{}
	if m := c.m.Load(); m != nil {
		for key, v := range *m {
			next[key] = v
		}
	}
	v := build()
	next[k] = v
	c.m.Store(&next)
	return v
}

func (c *Cache[K, V]) lookup(k K, current func(V) bool) (V, bool) {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok && (current == nil || current(v)) {
			return v, true
		}
	}
	var zero V
	return zero, false
}
