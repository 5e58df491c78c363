package iq

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/azkafka/azkafka/internal/testkit/metricstest"
	"github.com/azkafka/azkafka/metrics"
)

// TestQueryMetrics: each Query reports its outcome, the copy that
// answered (or was tried last), and the replicas tried.
func TestQueryMetrics(t *testing.T) {
	errHard := errors.New("bad request")
	// fails maps hosts to their error; the others answer.
	failing := func(fails map[string]error) QueryFunc {
		return func(_ context.Context, r Replica) error { return fails[r.Host] }
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name      string
		activeLag int64
		maxLag    int64
		ctx       context.Context
		fn        QueryFunc
		want      metricstest.Query
	}{
		{"active answers", 0, defaultMaxLag, context.Background(), failing(nil),
			metricstest.Query{Outcome: metrics.QueryOK, Copy: metrics.CopyActive, Attempts: 1}},
		{"standby in zone answers", 0, defaultMaxLag, context.Background(), failing(map[string]error{"a": ErrNotActive}),
			metricstest.Query{Outcome: metrics.QueryOK, Copy: metrics.CopyStandbyInZone, Attempts: 2}},
		{"standby of another zone answers", 0, defaultMaxLag, context.Background(), failing(map[string]error{"a": ErrNotActive, "b": ErrNotActive}),
			metricstest.Query{Outcome: metrics.QueryOK, Copy: metrics.CopyStandbyOtherZone, Attempts: 3}},
		{"every attempt fails", 0, defaultMaxLag, context.Background(), failing(map[string]error{"a": ErrNotActive, "b": ErrNotActive, "f": ErrNotActive}),
			metricstest.Query{Outcome: metrics.QueryFailed, Copy: metrics.CopyStandbyOtherZone, Attempts: 3}},
		{"an error not worth another", 0, defaultMaxLag, context.Background(), failing(map[string]error{"a": errHard}),
			metricstest.Query{Outcome: metrics.QueryFailed, Copy: metrics.CopyActive, Attempts: 1}},
		{"no replica", 50000, 2, context.Background(), failing(nil),
			metricstest.Query{Outcome: metrics.QueryNoReplica, Copy: metrics.CopyNone}},
		{"canceled", 0, defaultMaxLag, canceled, failing(nil),
			metricstest.Query{Outcome: metrics.QueryCanceled, Copy: metrics.CopyNone}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := newSnapshot(policyModel(tt.activeLag))
			if err != nil {
				t.Fatal(err)
			}
			p := metricstest.New()
			c, err := NewClient(sourceOf(snap), WithAllowStandby(true), WithAZ("az1"), WithMaxLag(tt.maxLag), withRandom(firstIndex),
				WithLookupEnv(envMap(nil)), WithMetrics(p))
			if err != nil {
				t.Fatal(err)
			}
			qerr := c.Query(tt.ctx, "s", []byte("KH01"), tt.fn)
			if (qerr == nil) != (tt.want.Outcome == metrics.QueryOK) {
				t.Fatalf("Query = %v, want outcome %v", qerr, tt.want.Outcome)
			}
			rec := p.Only(t)
			if cl := rec.Client(); cl.Kind != metrics.KindIQ || cl.AZ != "az1" || cl.AZSource != "option" {
				t.Errorf("Client = %+v", cl)
			}
			qs := rec.Queries()
			if len(qs) != 1 {
				t.Fatalf("%d Queried events, want 1", len(qs))
			}
			got := qs[0]
			got.Duration = 0
			tt.want.Store = "s"
			if got != tt.want {
				t.Errorf("Queried %s, want %s", fmt.Sprint(got), fmt.Sprint(tt.want))
			}
		})
	}
}
