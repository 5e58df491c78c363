package iq

import (
	"context"
	"errors"
	"sync/atomic"
)

// CombinedSource is a Source whose routing comes from one source and whose
// lags (and zones, where the first has none) come from another: typically
// the routing from a ClusterSource, which needs no Java-side code, and the
// measured lags from an HTTPSource, where the instances serve the metadata
// endpoint. An instance the lag source does not know keeps the routing
// source's lags (a ClusterSource's upper bounds). It is safe for
// concurrent use.
type CombinedSource struct {
	routing, lags Source
	cache         atomic.Pointer[combined]
}

type combined struct {
	routing, lags, out *Snapshot
}

// NewCombinedSource returns a source that routes with routing's metadata
// and takes lags from lags.
func NewCombinedSource(routing, lags Source) (*CombinedSource, error) {
	if routing == nil || lags == nil {
		return nil, errors.New("iq: NewCombinedSource: nil source")
	}
	return &CombinedSource{routing: routing, lags: lags}, nil
}

// Snapshot returns the combined metadata, or nil while the routing source
// has none. It is rebuilt only when either source's snapshot changes.
func (c *CombinedSource) Snapshot() *Snapshot {
	r, l := c.routing.Snapshot(), c.lags.Snapshot()
	if r == nil {
		return nil
	}
	if l == nil {
		return r
	}
	if cached := c.cache.Load(); cached != nil && cached.routing == r && cached.lags == l {
		return cached.out
	}
	md := r.Metadata()
	own := make(map[HostInfo]*Instance, len(l.md.Instances))
	for i := range l.md.Instances {
		own[l.md.Instances[i].HostInfo] = &l.md.Instances[i]
	}
	for i := range md.Instances {
		in := &md.Instances[i]
		o := own[in.HostInfo]
		if o == nil {
			continue
		}
		for store, m := range o.Lags { // the measured lags win, store by store
			if in.Lags == nil {
				in.Lags = map[string]map[int]Lag{}
			}
			in.Lags[store] = m // NewSnapshot copies it
		}
		if in.AZ == "" {
			in.AZ = o.AZ
		}
	}
	out, err := NewSnapshot(md)
	if err != nil { // cannot happen: md passed NewSnapshot once
		return r
	}
	c.cache.Store(&combined{r, l, out})
	return out
}

// Refresh refreshes both sources that can be refreshed; it fails only when
// the routing source fails.
func (c *CombinedSource) Refresh(ctx context.Context) error {
	if l, ok := c.lags.(Refresher); ok {
		_ = l.Refresh(ctx) // lags are optional: the routing keeps its own
	}
	if r, ok := c.routing.(Refresher); ok {
		return r.Refresh(ctx)
	}
	return nil
}
