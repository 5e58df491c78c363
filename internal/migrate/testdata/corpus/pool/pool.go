// Package pool runs a worker pool of Readers in one group.
package pool

import (
	"context"
	"sync"

	"github.com/segmentio/kafka-go"
)

// Pool is n Readers of one group.
type Pool struct {
	readers []*kafka.Reader
	byName  map[string]*kafka.Reader
}

// New starts n Readers.
func New(n int, cfg kafka.ReaderConfig) *Pool {
	p := &Pool{byName: map[string]*kafka.Reader{}}
	for i := 0; i < n; i++ {
		r := kafka.NewReader(cfg)
		p.readers = append(p.readers, r)
		p.byName[string(rune('a'+i))] = r
	}
	return p
}

// Run reads until ctx ends or the pool has read want messages, calling
// handle for each (concurrently).
func (p *Pool) Run(ctx context.Context, want int, handle func(kafka.Message)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	read := 0
	for _, r := range p.readers {
		wg.Add(1)
		go func(r *kafka.Reader) {
			defer wg.Done()
			for {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					return
				}
				handle(m)
				mu.Lock()
				read++
				if read >= want {
					cancel()
				}
				mu.Unlock()
			}
		}(r)
	}
	wg.Wait()
}

// Close closes every Reader.
func (p *Pool) Close() {
	for _, r := range p.readers {
		r.Close()
	}
}
