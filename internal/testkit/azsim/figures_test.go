package azsim_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/azsim"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
)

// TestConvergenceFigures repeats story a and prints convergence figures.
// Opt-in, as it is slow:
//
//	AZSIM_CONVERGENCE_RUNS=20 go test -run TestConvergenceFigures -v ./internal/testkit/azsim
//
// AZSIM_CONVERGENCE_CLIENT picks the clients: sdk-ttl300ms (default),
// sdk-default (kafka-go's 6s metadata TTL; each run lasts ~10s) or
// plain-flag-ttl300ms (raw kafka-go with a hand-stamped client ID) or
// plain-no-flags (story c: raw kafka-go, no AZ, no flag).
func TestConvergenceFigures(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("AZSIM_CONVERGENCE_RUNS"))
	if runs <= 0 {
		t.Skip("set AZSIM_CONVERGENCE_RUNS=20 to measure convergence figures")
	}
	kind := os.Getenv("AZSIM_CONVERGENCE_CLIENT")
	if kind == "" {
		kind = "sdk-ttl300ms"
	}
	after := 1600 * time.Millisecond
	const withFlag = "warpstream_session_id=7b0c,warpstream_az=az-b,warpstream_interzone_lb=true"
	var story azsim.Story
	switch kind {
	case "sdk-ttl300ms":
		story.NewProducer = sdkWriter(300 * time.Millisecond)
	case "sdk-default":
		story.NewProducer = sdkWriter(0)
		after = 14 * time.Second // the settled window (second half) starts after the 6s TTL
	case "plain-flag-ttl300ms":
		story.NewProducer = plainWriter(withFlag, 300*time.Millisecond)
	case "plain-no-flags": // story c
		story.NewProducer = plainWriter("plain-app", 0)
		story.Locate = func(string) string { return "az-b" }
	default:
		t.Fatalf("AZSIM_CONVERGENCE_CLIENT=%q: want sdk-ttl300ms, sdk-default, plain-flag-ttl300ms or plain-no-flags", kind)
	}
	var conv, swP99, stP99 []time.Duration
	var before, afterB, settled []int64
	var lost, dups, failed, acked, notConverged int
	for i := 0; i < runs; i++ {
		c := embedded.StartT(t, embedded.Topic(storyTopic, 3))
		s := story
		s.Backend, s.Topic = c.Addrs()[0], storyTopic
		s.Before, s.After = 800*time.Millisecond, after
		switch kind {
		case "plain-flag-ttl300ms":
			s.NewConsumer = plainReader(withFlag, fmt.Sprintf("g%d", i))
		case "plain-no-flags":
			s.NewConsumer = plainReader("plain-app", fmt.Sprintf("g%d", i))
		default:
			s.NewConsumer = sdkReader(fmt.Sprintf("g%d", i))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		rep, err := s.Run(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		t.Logf("run %2d: %s", i, rep)
		if !rep.Converged {
			notConverged++
		}
		conv = append(conv, rep.Convergence)
		swP99 = append(swP99, rep.SwitchP99)
		stP99 = append(stP99, rep.SteadyP99)
		before = append(before, rep.CrossBefore.ProduceBytes+rep.CrossBefore.FetchBytes)
		afterB = append(afterB, rep.CrossAfter.ProduceBytes+rep.CrossAfter.FetchBytes)
		settled = append(settled, rep.CrossSettled.ProduceBytes+rep.CrossSettled.FetchBytes)
		lost += rep.Lost
		dups += rep.Duplicates
		failed += rep.Failed
		acked += rep.Acked
	}
	t.Logf("client=%s runs=%d interval=200ms", kind, runs)
	t.Logf("convergence: median=%v p99=%v max=%v; runs not converged: %d", q(conv, 50), q(conv, 99), q(conv, 100), notConverged)
	t.Logf("cross-AZ produce+fetch bytes (median per run): before=%d (%.1fs) after-agent=%d settled=%d (max %d)",
		qi(before, 50), (800 * time.Millisecond).Seconds(), qi(afterB, 50), qi(settled, 50), qi(settled, 100))
	t.Logf("produce p99 (median over runs): steady=%v switch=%v; worst switch p99=%v", q(stP99, 50), q(swP99, 50), q(swP99, 100))
	t.Logf("messages: acked=%d lost=%d failed=%d duplicates=%d", acked, lost, failed, dups)
	if lost != 0 {
		t.Errorf("lost %d acknowledged messages", lost)
	}
}

// q is the nearest-rank percentile of ds.
func q(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[max((len(s)*p+99)/100-1, 0)]
}

func qi(xs []int64, p int) int64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[max((len(s)*p+99)/100-1, 0)]
}
