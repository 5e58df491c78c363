package iq

// inspect.go is the package's one inspection hook: what the azkafka
// command shows of a Source's group and a Client's policy, through
// internal/iqinspect, without exporting either.

import "github.com/azkafka/azkafka/internal/iqinspect"

func init() { iqinspect.Register(iqinspect.Hooks{Group: inspectGroup, Policy: inspectPolicy}) }

// inspectGroup is iqinspect.Hooks.Group: what a cluster source read from
// its group on its last good poll.
func inspectGroup(src any) *iqinspect.Group {
	if s, ok := src.(*Source); ok {
		if cs, ok := s.impl.(*clusterSource); ok {
			return cs.info.Load()
		}
	}
	return nil
}

// inspectPolicy is iqinspect.Hooks.Policy.
func inspectPolicy(client any) iqinspect.Policy {
	c, ok := client.(*Client)
	if !ok {
		return iqinspect.Policy{}
	}
	return iqinspect.Policy{AllowStandby: c.allowStandby, MaxLag: c.maxLag, CallerAZ: c.callerAZ}
}
