package deliverytest

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/azkafka/azkafka/internal/testkit/azsim"
)

// recorder is a testing.TB that records failures instead of reporting
// them; Fatalf ends the calling goroutine as testing.T's does.
type recorder struct {
	testing.TB
	errors []string
	fatal  bool
}

func (r *recorder) Helper()             {}
func (r *recorder) Logf(string, ...any) {}
func (r *recorder) Errorf(f string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(f, args...))
}
func (r *recorder) Fatalf(f string, args ...any) {
	r.Errorf(f, args...)
	r.fatal = true
	runtime.Goexit()
}

func checkStory(rep azsim.StoryReport, want StoryWant) *recorder {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		CheckStory(r, "story", rep, want)
	}()
	<-done
	return r
}

func TestCheckStory(t *testing.T) {
	good := azsim.StoryReport{
		CrossBefore:       azsim.Traffic{ProduceBytes: 10, FetchBytes: 10},
		CrossAfterRemoval: azsim.Traffic{ProduceBytes: 5, FetchBytes: 5},
		Acked:             100, Consumed: 100, Moved: true,
	}
	with := func(f func(*azsim.StoryReport)) azsim.StoryReport { r := good; f(&r); return r }
	converged := StoryWant{FetchConverges: "yes", ProduceConverges: "yes", RemoveLocal: true, NoFailedWrites: true}
	tests := []struct {
		name       string
		rep        azsim.StoryReport
		want       StoryWant
		wantErrors int
		wantFatal  bool
	}{
		{"all good", good, converged, 0, false},
		{"nothing crossed before", with(func(r *azsim.StoryReport) { r.CrossBefore.FetchBytes = 0 }), converged, 1, true},
		{"never reached the local agent", with(func(r *azsim.StoryReport) { r.Moved = false }), converged, 1, false},
		{"never reached it, none expected", with(func(r *azsim.StoryReport) { r.Moved = false; r.CrossSettled.FetchBytes = 1 }), StoryWant{FetchConverges: "no", ProduceConverges: "any"}, 0, false},
		{"fetch did not converge", with(func(r *azsim.StoryReport) { r.CrossSettled.FetchBytes = 1 }), converged, 1, false},
		{"produce converged, want no", good, StoryWant{FetchConverges: "any", ProduceConverges: "no"}, 1, false},
		{"any accepts both", with(func(r *azsim.StoryReport) { r.CrossSettled.ProduceBytes = 1 }), StoryWant{FetchConverges: "any", ProduceConverges: "any"}, 0, false},
		{"lost, not on the broker", with(func(r *azsim.StoryReport) { r.Lost = 2; r.LostStored = 1; r.Consumed = 98 }), StoryWant{FetchConverges: "any", ProduceConverges: "any", MaySkipStored: true}, 1, false},
		{"skipped stored, not allowed", with(func(r *azsim.StoryReport) { r.Lost = 2; r.LostStored = 2; r.Consumed = 98 }), converged, 2, false},
		{"skipped stored, allowed", with(func(r *azsim.StoryReport) { r.Lost = 2; r.LostStored = 2; r.Consumed = 98 }), StoryWant{FetchConverges: "any", ProduceConverges: "any", MaySkipStored: true}, 0, false},
		{"stored twice", with(func(r *azsim.StoryReport) { r.Duplicates = 1 }), StoryWant{FetchConverges: "yes", ProduceConverges: "yes", NoDuplicates: true}, 1, false},
		{"stored twice, allowed", with(func(r *azsim.StoryReport) { r.Duplicates = 1 }), converged, 0, false},
		{"re-delivered, no duplicates wanted", with(func(r *azsim.StoryReport) { r.Redelivered = 3 }), StoryWant{FetchConverges: "yes", ProduceConverges: "yes", NoDuplicates: true}, 0, false},
		{"failed writes", with(func(r *azsim.StoryReport) { r.Failed = 3 }), converged, 1, false},
		{"failed writes allowed", with(func(r *azsim.StoryReport) { r.Failed = 3 }), StoryWant{FetchConverges: "any", ProduceConverges: "any"}, 0, false},
		{"nothing acked", with(func(r *azsim.StoryReport) { r.Acked, r.Consumed = 0, 0 }), converged, 1, false},
		{"no traffic after removal", with(func(r *azsim.StoryReport) { r.CrossAfterRemoval.ProduceBytes = 0 }), converged, 1, false},
		{"removal not asked", with(func(r *azsim.StoryReport) { r.CrossAfterRemoval = azsim.Traffic{} }), StoryWant{FetchConverges: "yes", ProduceConverges: "yes"}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := checkStory(tt.rep, tt.want)
			if len(r.errors) != tt.wantErrors || r.fatal != tt.wantFatal {
				t.Errorf("errors %q (fatal %v), want %d errors (fatal %v)", r.errors, r.fatal, tt.wantErrors, tt.wantFatal)
			}
		})
	}
}
