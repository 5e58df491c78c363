package sdk

// writer_async.go holds what paces async mode: BatchSize as the trigger to
// send the messages waiting for BatchTimeout (the engine's linger), as in
// kafka-go. It pairs with writer_call.go, whose partitioner counts the
// messages.

import (
	"context"
	"sync"
	"sync/atomic"
)

// batchFill makes BatchSize the async Writer's trigger to send, as in
// kafka-go: once BatchSize messages wait on one partition, the waiting
// messages of every partition go without waiting for BatchTimeout (the
// engine's linger); messages that arrive while they go are sent at once
// too. The engine cuts batches by bytes, so a batch may carry more than
// BatchSize messages.
type batchFill struct {
	size    int
	mu      sync.Mutex
	waiting map[batchKey]int // messages partitioned since the last send
	sending atomic.Bool
	wg      sync.WaitGroup
}

type batchKey struct {
	topic     string
	partition int32
}

// add counts a message partitioned to topic/partition and reports whether
// the messages waiting should be sent now.
func (f *batchFill) add(topic string, partition int32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := batchKey{topic, partition}
	f.waiting[k]++
	if f.waiting[k] < f.size || f.sending.Load() {
		return false
	}
	clear(f.waiting)
	return true
}

// sendNow sends every message waiting, without their linger: kgo's Flush
// hurries what is buffered and what is produced until it returns. One
// runs at a time; Close waits for it.
func (w *Writer) sendNow() {
	f := w.fill
	if !f.sending.CompareAndSwap(false, true) {
		return
	}
	cl := w.engine()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer f.sending.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), w.conf.budget)
		defer cancel()
		_ = cl.Flush(ctx)
	}()
}
