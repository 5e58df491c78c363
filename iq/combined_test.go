package iq

import (
	"context"
	"strings"
	"testing"
	"time"
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
	// The combined source owns both: Start and Close reach them, and its
	// LastPoll is the routing source's.
	rs.lastOK = time.Unix(42, 0)
	c.Start()
	if err := c.Close(); err != nil || rs.starts != 1 || ls.starts != 1 || rs.closes != 1 || ls.closes != 1 {
		t.Errorf("Start/Close: %v; starts %d %d, closes %d %d", err, rs.starts, ls.starts, rs.closes, ls.closes)
	}
	if at, err := c.LastPoll(); !at.Equal(rs.lastOK) || err != nil {
		t.Errorf("LastPoll = %v, %v; want the routing source's", at, err)
	}
	if md, ok := c.Metadata(); !ok || len(md.Instances) != 3 {
		t.Errorf("Metadata = %d instances, %v", len(md.Instances), ok)
	}
	rs.snaps = nil
	if _, ok := c.Metadata(); ok {
		t.Error("no routing, yet metadata")
	}
	if c.snapshot() != nil {
		t.Error("no routing, yet a snapshot")
	}
	if _, err := NewCombinedSource(nil, &Source{impl: ls}); err == nil {
		t.Error("nil source accepted")
	}
}

func TestStaticSource(t *testing.T) {
	bad := threeHosts()
	bad.Instances[0].Port = 0
	if _, err := NewStaticSource(bad); err == nil || !strings.Contains(err.Error(), "invalid host") {
		t.Errorf("invalid metadata: %v", err)
	}
	md := threeHosts()
	s, err := NewStaticSource(md)
	if err != nil {
		t.Fatal(err)
	}
	md.Instances[0].Host = "changed" // copied: the source does not see it
	s.Start()
	if err := s.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, ok := s.Metadata()
	if at, err := s.LastPoll(); !ok || got.Instances[0].Host != "a" || at.IsZero() || err != nil {
		t.Errorf("Metadata %+v, %v; LastPoll %v, %v", got.Instances[0].HostInfo, ok, at, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
