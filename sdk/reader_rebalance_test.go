package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/sdk"
)

// TestReaderKeepsPartitionsAcrossRebalances: a classic group member that
// reads a live topic while other members join and leave keeps some of its
// partitions through each (eager) rebalance. The engine restarts a kept
// partition at the committed offset, so a poll that waited across the
// rebalance returns the new start: the Reader must hand those records out.
// (Dropping them as "revoked during the poll" skipped stored messages:
// the member read offset N-1, then N+k, and committed past the gap.)
// Every offset produced must be read at least once, and the group ends
// committed at the end.
func TestReaderKeepsPartitionsAcrossRebalances(t *testing.T) {
	t.Parallel()
	const parts = 4
	rig := newFaultRig(t, "rkeep", parts)
	cfg := groupTestConfig(rig, "keep")
	cfg.Brokers = []string{rig.readAddr()}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var mu sync.Mutex
	seen := map[[2]int64]bool{}
	read := func(r *sdk.Reader, stop <-chan struct{}) error {
		for {
			select {
			case <-stop:
				return nil
			default:
			}
			fctx, fcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			m, err := r.FetchMessage(fctx)
			fcancel()
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				continue
			}
			if err != nil {
				return err
			}
			mu.Lock()
			seen[[2]int64{int64(m.Partition), m.Offset}] = true
			mu.Unlock()
			// The group's refusal of a commit whose partition went to
			// the other member meanwhile is an outcome CommitMessages
			// documents (the new owner reads it again): go on.
			if err := r.CommitMessages(ctx, m); err != nil && !groupRefused(err) {
				return err
			}
		}
	}

	// A steady trickle, so that the first member is caught up (waiting in
	// a poll) when each rebalance comes.
	var produced sync.WaitGroup
	produced.Add(1)
	prodStop := make(chan struct{})
	go func() {
		defer produced.Done()
		for i := 0; ; i++ {
			select {
			case <-prodStop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			produceDirect(t, rig, deliverytest.Messages(fmt.Sprintf("k%d-", i), 4))
		}
	}()

	first, err := sdk.NewReader(cfg, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	firstStop := make(chan struct{})
	firstDone := make(chan error, 1)
	go func() { firstDone <- read(first, firstStop) }()

	// Wait until the first member reads, then let members come and go.
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	// seenWithin waits until n offsets were read, false after within.
	seenWithin := func(n int, within time.Duration) bool {
		deadline := time.After(within)
		for count() < n {
			select {
			case err := <-firstDone:
				t.Fatalf("the first member stopped: %v", err)
			case <-deadline:
				return false
			case <-time.After(10 * time.Millisecond):
			}
		}
		return true
	}
	waitSeen := func(n int) {
		t.Helper()
		if !seenWithin(n, 30*time.Second) {
			t.Fatalf("read %d messages within 30s, want %d", count(), n)
		}
	}
	waitSeen(40)
	for round := range 4 {
		other, err := sdk.NewReader(cfg, testOptions(t)...)
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		done := make(chan error, 1)
		go func() { done <- read(other, stop) }()
		waitSeen(count() + 80) // both members read after the join
		close(stop)
		if err := <-done; err != nil {
			t.Fatalf("round %d: the joining member: %v", round, err)
		}
		if err := other.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		waitSeen(count() + 40) // the first member reads after the leave
	}
	close(prodStop)
	produced.Wait()

	end := rig.endOffsets(t)
	var total int64
	for _, e := range end {
		total += e
	}
	seenWithin(int(total), 20*time.Second) // what is missing then is reported below
	close(firstStop)
	if err := <-firstDone; err != nil {
		t.Fatalf("the first member: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var missing []string
	for p, e := range end {
		for o := int64(0); o < e; o++ {
			if !seen[[2]int64{int64(p), o}] {
				missing = append(missing, fmt.Sprintf("%d/%d", p, o))
			}
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d stored offsets never read: %v", len(missing), missing)
	}
	rig.requireCommittedToEnd(t, cfg.GroupID)
	t.Logf("read all %d offsets of %d partitions through 4 joins and leaves", total, parts)
}

// groupRefused reports whether err is the group's refusal of a commit
// for its generation.
func groupRefused(err error) bool {
	return errors.Is(err, kafka.RebalanceInProgress) || errors.Is(err, kafka.IllegalGeneration) || errors.Is(err, kafka.UnknownMemberId)
}
