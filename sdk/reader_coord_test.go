package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/sdk"
)

// TestReaderCommitsOnItsOwnConnection: a group Reader's synchronous
// commits, one per message, are answered on the Reader's own connection
// to the coordinator (plaintext and TLS): every OffsetCommit request on
// one connection that carries nothing else (ApiVersions first), with the
// Reader's client ID; and a new member of the group starts after the last
// committed message.
func TestReaderCommitsOnItsOwnConnection(t *testing.T) {
	t.Parallel()
	for _, secure := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", secure), func(t *testing.T) {
			t.Parallel()
			var rig *faultRig
			if secure {
				rig = newTLSFaultRig(t, "rcoord", 1)
			} else {
				rig = newFaultRig(t, "rcoord", 1)
			}
			// Which requests each connection carried (plaintext only:
			// the TLS rig's proxy relays bytes it cannot read).
			var mu sync.Mutex
			keys := map[uint64][]int16{}
			clientIDs := map[string]bool{}
			rig.proxy.OnRequest(func(r kproxy.Request) kproxy.Action {
				mu.Lock()
				defer mu.Unlock()
				keys[r.ConnID] = append(keys[r.ConnID], r.Key)
				if r.Key == keyOffsetCommit {
					clientIDs[r.ClientID] = true
				}
				return kproxy.Forward
			})
			const n = 30
			sent := deliverytest.Messages("c", n)
			produceDirect(t, rig, sent)
			r, err := sdk.NewReader(groupTestConfig(rig, "coord"), testOptions(t)...)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ctx := testCtx(t)
			commitEach(ctx, t, r, n)
			clientID := r.Stats().ClientID
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if !secure {
				mu.Lock()
				var commitConns []uint64
				for id, ks := range keys {
					for _, k := range ks {
						if k == keyOffsetCommit {
							commitConns = append(commitConns, id)
							break
						}
					}
				}
				if len(commitConns) != 1 {
					t.Errorf("OffsetCommit requests on %d connections, want 1", len(commitConns))
				} else if ks := keys[commitConns[0]]; ks[0] != keyApiVersions || countKey(ks, keyOffsetCommit) != len(ks)-1 {
					t.Errorf("the commit connection carried %v, want ApiVersions then OffsetCommit requests only", ks)
				}
				if len(clientIDs) != 1 || !clientIDs[clientID] {
					t.Errorf("OffsetCommit client IDs %v, want the Reader's %q", clientIDs, clientID)
				}
				mu.Unlock()
			}
			// A new member starts after the last commit.
			after := kafka.Message{Key: []byte("after"), Value: []byte("after")}
			produceDirect(t, rig, []kafka.Message{after})
			if m := nextMember(ctx, t, groupTestConfig(rig, "coord")); string(m.Value) != "after" || m.Offset != n {
				t.Errorf("the next member read %q at offset %d, want %q at %d", m.Value, m.Offset, "after", n)
			}
		})
	}
}

// commitEach fetches n messages with r and commits each one, and checks
// that r's own coordinator connection answered every commit.
func commitEach(ctx context.Context, t *testing.T, r *sdk.Reader, n int) {
	t.Helper()
	for i := range n {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.CommitMessages(ctx, m); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	if got := sdk.CoordCommits(r); got != int64(n) {
		t.Errorf("%d of %d commits answered on the Reader's own connection", got, n)
	}
}

// nextMember is the first message a new member of cfg's group fetches.
func nextMember(ctx context.Context, t *testing.T, cfg kafka.ReaderConfig) kafka.Message {
	t.Helper()
	r, err := sdk.NewReader(cfg, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m, err := r.FetchMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func countKey(ks []int16, key int16) int {
	c := 0
	for _, k := range ks {
		if k == key {
			c++
		}
	}
	return c
}

// TestReaderCommitsOnItsOwnConnectionWithSASL: with SASL/PLAIN required
// by the broker, the Reader's own coordinator connection authenticates
// and answers every commit.
func TestReaderCommitsOnItsOwnConnectionWithSASL(t *testing.T) {
	t.Parallel()
	k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "sasl-coord"),
		kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	mech := plain.Mechanism{Username: "admin", Password: "secret"}
	ctx := testCtx(t)
	const n = 20
	w := &kafka.Writer{Addr: kafka.TCP(k.ListenAddrs()...), Topic: "sasl-coord", Transport: &kafka.Transport{SASL: mech}}
	defer w.Close()
	if err := w.WriteMessages(ctx, deliverytest.Messages("s", n+1)...); err != nil {
		t.Fatal(err)
	}
	cfg := kafka.ReaderConfig{Brokers: k.ListenAddrs(), GroupID: "sasl-coord", Topic: "sasl-coord",
		StartOffset: kafka.FirstOffset, MaxWait: 50 * time.Millisecond,
		Dialer: &kafka.Dialer{Timeout: 5 * time.Second, SASLMechanism: mech}}
	r, err := sdk.NewReader(cfg, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	commitEach(ctx, t, r, n)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if m := nextMember(ctx, t, cfg); m.Offset != n {
		t.Errorf("the next member started at offset %d, want %d", m.Offset, n)
	}
}

// TestCommitRefusedUntilCtxEndsNamesTheRefusal: a coordinator that answers
// every commit NOT_COORDINATOR is waited out until the call's ctx ends
// (see CommitMessages); the error then matches ctx's and names the refusal
// and the coordinator's address, not ctx's alone.
func TestCommitRefusedUntilCtxEndsNamesTheRefusal(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "rcoordrefused", 1)
	produceDirect(t, rig, deliverytest.Messages("r", 2))
	r, err := sdk.NewReader(groupTestConfig(rig, "refused"), testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m, err := r.FetchMessage(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CommitMessages(testCtx(t), m); err != nil {
		t.Fatal(err) // the Reader's own coordinator connection is open
	}
	refused := make(chan struct{}, 1)
	rig.proxy.OnResponse(kproxy.FailCommits(int16(kerr.NotCoordinator.Code), func(err error) { t.Error(err) }))
	rig.proxy.OnRequest(func(req kproxy.Request) kproxy.Action {
		if req.Key == keyOffsetCommit {
			select {
			case refused <- struct{}{}:
			default:
			}
		}
		return kproxy.Forward
	})
	ctx, cancel := context.WithCancel(testCtx(t))
	go func() {
		<-refused // the commit was sent and refused: the call waits it out
		<-refused // and asked again
		cancel()
	}()
	m.Offset++
	err = r.CommitMessages(ctx, m)
	t.Logf("CommitMessages: %v", err)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("CommitMessages: %v; want ctx's error", err)
	}
	for _, want := range []string{"NOT_COORDINATOR", rig.proxy.Addr()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("CommitMessages: %q does not name %q", err, want)
		}
	}
}
