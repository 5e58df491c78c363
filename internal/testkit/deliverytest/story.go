package deliverytest

import (
	"testing"

	"github.com/azkafka/azkafka/internal/testkit/azsim"
)

// StoryWant is what an azsim story's report must show.
type StoryWant struct {
	// FetchConverges and ProduceConverges: whether cross-AZ fetch and
	// produce bytes stopped in the settled window: "yes", "no", or "any"
	// when it depends on timing (kafka-go's random metadata refresh).
	FetchConverges, ProduceConverges string
	// RemoveLocal: the story removed the local agent, so cross-AZ produce
	// and fetch bytes must flow again after it.
	RemoveLocal bool
	// NoFailedWrites: no write may fail (the clients absorb the faults).
	NoFailedWrites bool
	// MaySkipStored: the consumer may skip messages that are on the broker
	// (a plain kafka-go group reader can, after a rejoin); such skips are
	// logged. Acknowledged messages missing from the broker always fail.
	MaySkipStored bool
	// NoDuplicates: no message may be stored twice (an idempotent
	// producer). Re-deliveries of one offset to the consumer group are
	// counted apart and allowed.
	NoDuplicates bool
}

// CheckStory logs rep and checks it against want: cross-AZ traffic before
// the local agent, convergence, loss, failed writes, that the consumer
// read every acknowledged message and, with RemoveLocal, traffic back
// across AZs. It stops the test only when nothing crossed AZs before the
// local agent (the story then proves nothing).
func CheckStory(tb testing.TB, name string, rep azsim.StoryReport, want StoryWant) {
	tb.Helper()
	tb.Logf("%s: %s", name, rep)
	tb.Logf("final accounting:\n%s", rep.Stats)
	if rep.CrossBefore.ProduceBytes == 0 || rep.CrossBefore.FetchBytes == 0 {
		tb.Fatalf("before the local agent: cross-AZ %+v, want produce and fetch bytes", rep.CrossBefore)
	}
	converges := func(what, want string, settled int64) {
		if want != "any" && (settled == 0) != (want == "yes") {
			tb.Errorf("%s converges = %v, want %s (settled-window cross-AZ %+v)", what, settled == 0, want, rep.CrossSettled)
		}
	}
	if want.FetchConverges == "yes" && want.ProduceConverges == "yes" && !rep.Moved {
		tb.Errorf("the clients did not both reach the local agent within the story's Settle bound (local %+v)", rep.Local)
	}
	converges("fetch", want.FetchConverges, rep.CrossSettled.FetchBytes)
	converges("produce", want.ProduceConverges, rep.CrossSettled.ProduceBytes)
	switch {
	case rep.Lost != rep.LostStored:
		tb.Errorf("lost %d acknowledged messages, %d of them not on the broker (%q)", rep.Lost, rep.Lost-rep.LostStored, rep.LostSample)
	case rep.Lost != 0 && !want.MaySkipStored:
		tb.Errorf("the consumer skipped %d stored messages (%q)", rep.Lost, rep.LostSample)
	case rep.Lost != 0:
		tb.Logf("the consumer skipped %d stored messages (%q)", rep.Lost, rep.LostSample)
	}
	if want.NoDuplicates && rep.Duplicates != 0 {
		tb.Errorf("%d messages stored more than once", rep.Duplicates)
	}
	if want.NoFailedWrites && rep.Failed != 0 {
		tb.Errorf("%d writes failed: %q", rep.Failed, rep.WriteErrors)
	}
	skipped := 0
	if want.MaySkipStored {
		skipped = rep.Lost
	}
	if rep.Acked == 0 || rep.Consumed+skipped < rep.Acked {
		tb.Errorf("acked %d, consumed %d", rep.Acked, rep.Consumed)
	}
	if want.RemoveLocal && (rep.CrossAfterRemoval.ProduceBytes == 0 || rep.CrossAfterRemoval.FetchBytes == 0) {
		tb.Errorf("after removing the local agent: cross-AZ %+v, want the clients back across AZs", rep.CrossAfterRemoval)
	}
}
