package iq

import (
	"context"
	"testing"
)

type countingSource struct {
	snap      *Snapshot
	refreshes int
}

func (c *countingSource) Snapshot() *Snapshot { return c.snap }
func (c *countingSource) Refresh(context.Context) error {
	c.refreshes++
	return nil
}

func TestCombinedSource(t *testing.T) {
	routing := threeHosts()
	bound := Lag{Current: 1, End: 100, Lag: 99, Bound: true}
	for i := range routing.Instances {
		routing.Instances[i].AZ = ""
		routing.Instances[i].Lags = map[string]map[int]Lag{"counts": {0: bound, 1: bound, 2: bound}}
	}
	lags := threeHosts()
	lags.Instances = lags.Instances[:2] // b did not answer: it keeps its bound
	r, _ := NewSnapshot(routing)
	l, _ := NewSnapshot(lags)
	rs, ls := &countingSource{snap: r}, &countingSource{snap: l}
	c, err := NewCombinedSource(rs, ls)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Snapshot()
	if c.Snapshot() != s {
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
	rs.snap = nil
	if c.Snapshot() != nil {
		t.Error("no routing, yet a snapshot")
	}
	if _, err := NewCombinedSource(nil, ls); err == nil {
		t.Error("nil source accepted")
	}
}
