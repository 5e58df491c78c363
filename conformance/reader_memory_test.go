//go:build conformance

package conformance

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/azkafka/azkafka/sdk"
)

// TestSDKReaderMemory measures the Go heap a group Reader holds while it
// reads 64 MiB of incompressible values from 1 and from 100 partitions of
// the real broker, and checks it stays within the bound the Reader
// documents (see sdk.DefaultFetchMaxBytes): per broker a response being
// read and one buffered, each at most DefaultFetchMaxBytes, the records
// decoded from them, and the garbage collector's slack (GOGC=100 lets the
// heap reach twice what is live).
func TestSDKReaderMemory(t *testing.T) {
	addrs := brokers(t)
	const (
		total = 64 << 20
		size  = 1 << 10
		n     = total / size
	)
	for _, parts := range []int{1, 100} {
		t.Run(fmt.Sprintf("partitions=%d", parts), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			topic := fmt.Sprintf("azkafka-sdk-memory-%d-%d", parts, time.Now().UnixNano())
			createTopic(t, ctx, addrs, topic, parts)
			produceBulk(t, ctx, addrs, topic, n, size)

			r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: addrs, GroupID: topic, Topic: topic,
				CommitInterval: time.Second, StartOffset: kafka.FirstOffset}, sdkcOptions()...)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			base := heapObjects()
			var peak uint64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					peak = max(peak, heapObjects())
					select {
					case <-stop:
						return
					case <-time.After(2 * time.Millisecond):
					}
				}
			}()
			start := time.Now()
			for i := 0; i < n; i++ {
				if _, err := r.ReadMessage(ctx); err != nil {
					close(stop)
					t.Fatalf("message %d of %d: %v", i, n, err)
				}
			}
			took := time.Since(start)
			close(stop)
			wg.Wait()
			grew := int64(peak) - int64(base)
			t.Logf("%d partitions: read %d MiB in %v; Go heap peak %.1f MiB above the %.1f MiB before the reads (sdk.DefaultFetchMaxBytes %d MiB)",
				parts, total>>20, took.Round(time.Millisecond), float64(grew)/(1<<20), float64(base)/(1<<20), sdk.DefaultFetchMaxBytes>>20)
			if bound := int64(6 * sdk.DefaultFetchMaxBytes); grew > bound {
				t.Errorf("the heap grew %d bytes reading, above %d (6 × DefaultFetchMaxBytes)", grew, bound)
			}
		})
	}
}

// heapObjects is the bytes of live and not yet swept heap objects.
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// produceBulk writes n values of size bytes spread over the topic's
// partitions with franz-go's producer, and collects the garbage it left.
func produceBulk(t *testing.T, ctx context.Context, addrs []string, topic string, n, size int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(5*time.Millisecond), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Random bytes: the producer's compression cannot shrink them, so the
	// fetches carry what their byte limits say.
	value := make([]byte, size)
	crand.Read(value)
	var failed error
	var mu sync.Mutex
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				failed = err
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if failed != nil {
		t.Fatal(failed)
	}
	runtime.GC()
}
