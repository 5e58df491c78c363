// Package iqinspect lets the azkafka command show what an iq.Source read
// from a Kafka Streams group and which policy an iq.Client applies,
// without package iq exporting either. The hook is one named value,
// Hooks, which package iq registers once, from the init function of its
// file inspect.go; GroupOf and PolicyOf call it.
package iqinspect

import "context"

// Group is what a cluster source read from the group on its last good
// poll, besides the routing metadata.
type Group struct {
	ApplicationID string
	// Protocol is "classic" or "streams".
	Protocol string
	// State is the group state the broker reports, e.g. "Stable".
	State   string
	Members []Member
	// StoreSubtopology maps each store mapped from the group to its
	// subtopology.
	StoreSubtopology map[string]string
}

// Member is one member of a Kafka Streams group (one stream thread in the
// classic protocol, one instance in the streams protocol).
type Member struct {
	MemberID, ClientID, ProcessID string
	// Endpoint is the instance's application.server, host:port; "" when
	// not set.
	Endpoint string
	// RackID is the member's client.rack; AZ the zone the source gives
	// the instance (the rack, else the AZ client tag).
	RackID, AZ string
	// ClientTags are the instance's client.tag.* settings, key=value.
	ClientTags []string
}

// Policy is what an iq.Client applies.
type Policy struct {
	AllowStandby bool
	MaxLag       int64
	// CallerAZ returns the caller's zone, detecting it once if no option
	// gave it; "" when unknown.
	CallerAZ func(context.Context) string
}

// Hooks is what package iq gives: how to read a Source's group and a
// Client's policy.
type Hooks struct {
	// Group returns what an *iq.Source built by NewClusterSource read
	// from the group on its last good poll; nil for another source or
	// before a good poll.
	Group func(src any) *Group
	// Policy returns the policy of an *iq.Client.
	Policy func(client any) Policy
}

var hooks Hooks

// Register sets the hooks; package iq calls it once, when it is
// initialised. A second call panics.
func Register(h Hooks) {
	if hooks.Group != nil || hooks.Policy != nil {
		panic("iqinspect: hooks registered twice")
	}
	hooks = h
}

// GroupOf returns what src, an *iq.Source, read from its group (see
// Hooks.Group); nil when package iq is not linked in.
func GroupOf(src any) *Group {
	if hooks.Group == nil {
		return nil
	}
	return hooks.Group(src)
}

// PolicyOf returns the policy of client, an *iq.Client (see
// Hooks.Policy); the zero Policy when package iq is not linked in.
func PolicyOf(client any) Policy {
	if hooks.Policy == nil {
		return Policy{}
	}
	return hooks.Policy(client)
}
