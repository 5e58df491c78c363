package sdk_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/segmentio/kafka-go"

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
			for i := range n {
				m, err := r.FetchMessage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := r.CommitMessages(ctx, m); err != nil {
					t.Fatalf("commit %d: %v", i, err)
				}
			}
			if got := sdk.CoordCommits(r); got != n {
				t.Errorf("%d of %d commits answered on the Reader's own connection", got, n)
			}
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
			r2, err := sdk.NewReader(groupTestConfig(rig, "coord"), testOptions(t)...)
			if err != nil {
				t.Fatal(err)
			}
			defer r2.Close()
			m, err := r2.FetchMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if string(m.Value) != "after" || m.Offset != n {
				t.Errorf("the next member read %q at offset %d, want %q at %d", m.Value, m.Offset, "after", n)
			}
		})
	}
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
