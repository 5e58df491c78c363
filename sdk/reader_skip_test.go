package sdk_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/sdk"
)

// groupConsumer is what the skip tests drive: kafka-go's Reader or
// the SDK's.
type groupConsumer interface {
	ReadMessage(context.Context) (kafka.Message, error)
	FetchMessage(context.Context) (kafka.Message, error)
	CommitMessages(context.Context, ...kafka.Message) error
	Close() error
}

// readerOf is the SDK's Reader for cfg when sdkReader is set, else
// kafka-go's.
func readerOf(t *testing.T, sdkReader bool, cfg kafka.ReaderConfig) groupConsumer {
	t.Helper()
	if !sdkReader {
		return kafka.NewReader(cfg)
	}
	r, err := sdk.NewReader(cfg, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// loseCommitResponses arranges that, for each offset in commits, the
// first OffsetCommit carrying that offset for partition 0 reaches the
// broker, which stores it, and that the connection then closes before the
// response reaches the client: the broker has the commit, the client sees
// a closed connection. lost returns the offsets whose commit response was
// lost so far, in order.
//
// The broker tells which OffsetCommit carries an offset (the proxy sees
// only request headers); the proxy closes the coordinator connection when
// that request's response comes back. A group member sends one commit at a
// time (kafka-go's synchronous commits), so the next OffsetCommit response
// on the proxy after the broker saw the offset is that commit's.
func loseCommitResponses(rig *faultRig, commits ...int64) (lost func() []int64) {
	var (
		mu      sync.Mutex
		pending       = slices.Clone(commits)
		armed   int64 = -1 // the offset whose response to lose next
		done    []int64
	)
	rig.broker.Kfake().ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, t := range req.(*kmsg.OffsetCommitRequest).Topics {
			for _, p := range t.Partitions {
				// v10+ names the topic by ID only; the rig has one topic.
				if i := slices.Index(pending, p.Offset); i >= 0 && (t.Topic == rig.topic || t.TopicID != [16]byte{}) && p.Partition == 0 {
					pending = slices.Delete(pending, i, i+1)
					armed = p.Offset
				}
			}
		}
		return nil, nil, false // observed only: the broker stores the commit
	})
	rig.proxy.OnResponse(func(req kproxy.Request, resp []byte) []byte {
		mu.Lock()
		defer mu.Unlock()
		if req.Key == keyOffsetCommit && armed >= 0 {
			rig.proxy.CloseConn(req.ConnID) // the response below is never written
			done = append(done, armed)
			armed = -1
		}
		return resp
	})
	return func() []int64 {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(done)
	}
}

// consumeResult is what a consumer returned, in order.
type consumeResult struct {
	offsets []int64 // offsets returned with a message, in order
	errs    []error // errors returned, in order
}

// skipped lists the offsets below end that were never returned.
func (c consumeResult) skipped(end int64) []int64 {
	var out []int64
	for o := int64(0); o < end; o++ {
		if !slices.Contains(c.offsets, o) {
			out = append(out, o)
		}
	}
	return out
}

// returnedAfter reports the offset returned right after the last return of
// offset o, or -1.
func (c consumeResult) returnedAfter(o int64) int64 {
	i := slices.Index(c.offsets, o)
	if i < 0 || i+1 >= len(c.offsets) {
		return -1
	}
	return c.offsets[i+1]
}

// consumeToEnd reads partition 0 until offset end-1 has been returned,
// committing every message, with ReadMessage (readMessage true) or
// FetchMessage then CommitMessages. Like a consumer that keeps going, it
// records errors and reads on; a message returned together with an error
// counts as returned.
func consumeToEnd(ctx context.Context, t *testing.T, r groupConsumer, end int64, readMessage bool) consumeResult {
	t.Helper()
	var res consumeResult
	for !slices.Contains(res.offsets, end-1) {
		if ctx.Err() != nil {
			t.Fatalf("offset %d not returned before the deadline; returned %v, errors %v", end-1, res.offsets, res.errs)
		}
		var m kafka.Message
		var err error
		if readMessage {
			m, err = r.ReadMessage(ctx)
		} else {
			m, err = r.FetchMessage(ctx)
			if err == nil {
				if cerr := r.CommitMessages(ctx, m); cerr != nil {
					res.errs = append(res.errs, fmt.Errorf("committing offset %d: %w", m.Offset, cerr))
				}
				res.offsets = append(res.offsets, m.Offset)
				continue
			}
		}
		if err != nil {
			res.errs = append(res.errs, err)
		}
		if m.Topic != "" { // a message, with or without an error
			res.offsets = append(res.offsets, m.Offset)
		}
	}
	return res
}

// TestReaderLostCommitResponse reproduces, every time, the skip of
// kafka-go's consumer-group Reader under connection closes, and checks that
// sdk.Reader does not skip on the same fault sequence.
//
// The sequence, at each offset N of skips: the caller reads the message at
// N; the Reader commits N+1; the broker stores that commit and the
// coordinator connection closes before the response arrives. kafka-go's
// ReadMessage then returns an empty message with the commit error: the
// message it fetched is dropped. The closed connection ends the group
// generation; the next one starts at the committed offset, N+1. So the
// message at N, stored on the broker, is never returned. FetchMessage
// followed by CommitMessages returns it (the commit error comes
// separately), so that path does not skip; sdk.Reader's ReadMessage returns
// the message, retries the commit through the next generation, and skips
// nothing either.
func TestReaderLostCommitResponse(t *testing.T) {
	const n = 24
	skips := []int64{4, 11, 18} // far enough apart that each lost commit is its own generation change
	var commits []int64
	for _, o := range skips {
		commits = append(commits, o+1)
	}
	for _, tc := range []struct {
		name        string
		sdk         bool
		readMessage bool
	}{
		{"kafka-go/ReadMessage", false, true},
		{"kafka-go/FetchMessage+CommitMessages", false, false},
		{"sdk/ReadMessage", true, true},
		{"sdk/FetchMessage+CommitMessages", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rig := newFaultRig(t, "rskip", 1)
			produceDirect(t, rig, deliverytest.Messages("s", n))
			if end := rig.endOffsets(t)[0]; end != n {
				t.Fatalf("partition 0 ends at %d, want %d: every offset below holds a record", end, n)
			}
			lost := loseCommitResponses(rig, commits...)

			cfg := groupTestConfig(rig, "skip")
			r := readerOf(t, tc.sdk, cfg)
			defer r.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res := consumeToEnd(ctx, t, r, n, tc.readMessage)
			if got := lost(); !slices.Equal(got, commits) {
				t.Fatalf("lost the responses of commits %v, want %v: the test proves nothing", got, commits)
			}
			skipped := res.skipped(n)
			var after []int64
			for _, o := range skips {
				after = append(after, res.returnedAfter(o-1))
			}
			t.Logf("returned offsets %v; after offsets %v came %v; skipped %v; %d errors %v",
				res.offsets, deltas(skips, -1), after, skipped, len(res.errs), res.errs)

			if !tc.sdk && tc.readMessage {
				// The control: kafka-go skips each offset whose commit
				// response was lost.
				for _, o := range skips {
					if !slices.Contains(skipped, o) {
						t.Errorf("kafka-go's ReadMessage returned offset %d, whose commit response was lost: the skip documented on sdk.Reader no longer happens", o)
					}
				}
				return
			}
			if len(skipped) != 0 {
				t.Errorf("skipped offsets %v, stored on the broker", skipped)
			}
			if tc.sdk {
				if len(res.errs) != 0 {
					t.Errorf("sdk.Reader returned errors %v, want none", res.errs)
				}
				rig.requireCommittedToEnd(t, cfg.GroupID)
			}
		})
	}
}

// deltas returns offsets shifted by d.
func deltas(offsets []int64, d int64) []int64 {
	out := make([]int64, len(offsets))
	for i, o := range offsets {
		out[i] = o + d
	}
	return out
}

// TestReaderCutFetchResponses cuts Fetch responses in the middle of their
// records, the other place a reader could lose its position under
// connection closes: kafka-go's partition reader hands out the records it
// read whole, and the next connection fetches from the offset after the
// last one it handed out. Neither reader skips; for kafka-go this is the
// control showing that its skip comes from the lost commit response above,
// not from the fetch path.
func TestReaderCutFetchResponses(t *testing.T) {
	const (
		n       = 1000
		maxCuts = 8
	)
	for _, tc := range []struct {
		name string
		sdk  bool
	}{
		{"kafka-go", false},
		{"sdk", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rig := newFaultRig(t, "rcut", 1)
			produceDirect(t, rig, deliverytest.Messages("f", n))
			var fetches, cuts atomic.Int64
			rig.proxy.OnResponseCut(func(req kproxy.Request, size int) int {
				// Every other Fetch response that carries records (an
				// empty one is 71 bytes; a full one here about 1000, three
				// record batches of 10 records), cut i of maxCuts at
				// i/(maxCuts+1) of the frame: in the first batch's header,
				// inside records of each batch, between records.
				if req.Key != keyFetch || size < 200 || fetches.Add(1)%2 == 0 || cuts.Load() >= maxCuts {
					return -1
				}
				return size * int(cuts.Add(1)) / (maxCuts + 1)
			})
			cfg := groupTestConfig(rig, "cut")
			r := readerOf(t, tc.sdk, cfg)
			defer r.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res := consumeToEnd(ctx, t, r, n, true)
			t.Logf("fetch responses with records %d, cut %d; %d offsets returned, skipped %v, %d errors %v", fetches.Load(), cuts.Load(), len(res.offsets), res.skipped(n), len(res.errs), res.errs)
			if cuts.Load() < maxCuts {
				t.Fatalf("cut %d Fetch responses before the end, want %d", cuts.Load(), maxCuts)
			}
			if s := res.skipped(n); len(s) != 0 {
				t.Errorf("skipped offsets %v, stored on the broker", s)
			}
		})
	}
}
