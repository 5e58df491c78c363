package iq

import (
	"context"
	"testing"
)

func TestCombinedSource(t *testing.T) {
	routing := threeHosts()
	bound := Lag{Current: 1, End: 100, Lag: 99, Bound: true}
	for i := range routing.Instances {
		routing.Instances[i].AZ = ""
		routing.Instances[i].Lags = map[string]map[int]Lag{"counts": {0: bound, 1: bound, 2: bound}}
	}
	lags := threeHosts()
	lags.Instances = lags.Instances[:2] // b did not answer: it keeps its bound
	r, _ := newSnapshot(routing)
	l, _ := newSnapshot(lags)
	rs, ls := &fakeSource{snaps: []*snapshot{r}}, &fakeSource{snaps: []*snapshot{l}}
	c, err := NewCombinedSource(&Source{impl: rs}, &Source{impl: ls})
	if err != nil {
		t.Fatal(err)
	}
	s := c.snapshot()
	if c.snapshot() != s {
		t.Error("snapshot rebuilt although neither source changed")
	}
	got := map[string]Instance{}
	for _, in := range s.Metadata().Instances {
		got[in.Host] = in
	}
	if a := got["a"]; a.AZ != "az1" || a.Lags["counts"][2] != (Lag{5, 25, 20, false}) {
		t.Errorf("a: AZ %q lags %v; want the HTTP source's", a.AZ, a.Lags)
	}
	if b := got["b"]; b.AZ != "" || b.Lags["counts"][0] != bound {
		t.Errorf("b: AZ %q lags %v; want the routing source's", b.AZ, b.Lags)
	}
	if err := c.Refresh(context.Background()); err != nil || rs.refreshes != 1 || ls.refreshes != 1 {
		t.Errorf("Refresh: %v, %d, %d", err, rs.refreshes, ls.refreshes)
	}
	rs.snaps = nil
	if c.snapshot() != nil {
		t.Error("no routing, yet a snapshot")
	}
	if _, err := NewCombinedSource(nil, &Source{impl: ls}); err == nil {
		t.Error("nil source accepted")
	}
}
