package iq

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// storeError is an error of Route and Candidates: it names the store,
// then says what went wrong, and wraps the error value callers match
// (ErrNotAvailable, ErrUnknownStore, ...), e.g.
//
//	iq: store "counts" partition 2: no active instance: routing metadata not available
type storeError struct {
	store  string
	detail string // what follows the store's name
	err    error  // the error value it wraps; nil for none
}

func (e *storeError) Error() string {
	s := "iq: store " + strconv.Quote(e.store) + e.detail
	if e.err != nil {
		s += ": " + strings.TrimPrefix(e.err.Error(), "iq: ")
	}
	return s
}

func (e *storeError) Unwrap() error { return e.err }

// HostInfo identifies a Kafka Streams instance by its application.server
// setting (Java's HostInfo).
type HostInfo struct {
	Host string
	Port int
}

// String returns host:port (brackets around an IPv6 host).
func (h HostInfo) String() string { return net.JoinHostPort(h.Host, strconv.Itoa(h.Port)) }

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int
}

// Lag is how far one instance's copy of a store partition is behind its
// changelog, in offsets (Java's LagInfo): Current is the position restored
// so far, End the changelog's end offset, Lag = End - Current.
type Lag struct {
	Current int64
	End     int64
	Lag     int64
	// Bound is true when Lag is an upper bound rather than the instance's
	// own figure: the cluster source's standby lags, computed from the
	// offset sums the instance reported when it joined the group. Current
	// and End are then sums over the task's changelog partitions.
	Bound bool
}

// Instance is one Kafka Streams instance as Java's StreamsMetadata describes
// it, plus the facts only the instance itself knows: its availability zone
// and its local store partition lags.
type Instance struct {
	HostInfo
	// AZ is the instance's availability zone; empty when unknown.
	AZ string
	// ActiveStores and ActivePartitions are StreamsMetadata.stateStoreNames
	// and topicPartitions.
	ActiveStores     []string
	ActivePartitions []TopicPartition
	// StandbyStores and StandbyPartitions are
	// StreamsMetadata.standbyStateStoreNames and standbyTopicPartitions.
	StandbyStores     []string
	StandbyPartitions []TopicPartition
	// Lags maps store name, then partition, to the instance's own lag
	// (KafkaStreams.allLocalStorePartitionLags). Nil when the instance could
	// not be asked: its replicas then count as of unknown lag.
	Lags map[string]map[int]Lag
}

// Metadata is everything Route needs, as one Kafka Streams application
// reports it: what Source.Metadata returns, and what NewStaticSource
// takes.
type Metadata struct {
	// StoreSourceTopics maps each store to the source topics of its
	// subtopology, in the order the topology lists them.
	StoreSourceTopics map[string][]string
	// TopicPartitions maps each source topic to its partition count.
	TopicPartitions map[string]int
	// Instances lists every instance of the application.
	Instances []Instance
	// UnmappedStores names stores known to exist whose source topics could
	// not be determined, with the reason and the way out. Route on such a
	// store returns an error wrapping ErrStoreTopicsUnknown.
	UnmappedStores map[string]string
}

// Replica is one copy of a store partition: the active one or a standby.
type Replica struct {
	HostInfo
	// AZ is the hosting instance's availability zone, empty when unknown.
	AZ string
	// Active is true for the active copy, false for a standby.
	Active bool
	// Lag is the copy's lag; meaningful only when LagKnown.
	Lag      Lag
	LagKnown bool
}

// Route is where a key lives, as Java's KeyQueryMetadata says: the
// partition, the active copy and the standby copies. Its slices are shared
// with the Client's current metadata and must not be modified.
type Route struct {
	Store     string
	Partition int
	// Active is the active copy; nil when no instance is active for the
	// partition (the route's error is then ErrNotAvailable).
	Active *Replica
	// Standbys are the standby copies, ordered by host then port.
	Standbys []Replica
}

// snapshot is an immutable, indexed form of Metadata: route on it takes a
// map lookup, one hash and a slice index. It is safe for concurrent use.
type snapshot struct {
	md     Metadata
	stores map[string]*storeIndex
}

type storeIndex struct {
	name string
	// topicWithMostPartitions and maxPartitions are what Java's
	// SourceTopicsInfo computes: the first source topic with the largest
	// partition count.
	topicWithMostPartitions string
	maxPartitions           int
	// routes[p] is the precomputed Route for partition p.
	routes []Route
}

// maxIndexedPartitions bounds the sum over stores of the partition count of
// each store's widest source topic, so that metadata from outside cannot
// make newSnapshot allocate without bound.
const maxIndexedPartitions = 1 << 20

// newSnapshot validates md and indexes it for route. md is copied; later
// changes to it do not affect the snapshot. The stores may have 1,048,576
// partitions in all (the partition count of each store's widest source
// topic, summed): metadata from outside cannot make it allocate without
// bound.
func newSnapshot(md Metadata) (*snapshot, error) {
	md = cloneMetadata(md)
	seen := make(map[HostInfo]bool, len(md.Instances))
	for i, in := range md.Instances {
		if in.Host == "" || in.Port <= 0 || in.Port > 65535 {
			return nil, fmt.Errorf("iq: metadata: instances[%d]: invalid host %q port %d", i, in.Host, in.Port)
		}
		if seen[in.HostInfo] {
			return nil, fmt.Errorf("iq: metadata: instances[%d]: duplicate instance %s", i, in.HostInfo)
		}
		seen[in.HostInfo] = true
	}
	for topic, n := range md.TopicPartitions {
		if n < 0 {
			return nil, fmt.Errorf("iq: metadata: topic %q: negative partition count %d", topic, n)
		}
	}
	// Java sorts StreamsMetadata by host, then port, and the active host is
	// the last match in that order; sorting here keeps ties identical.
	slices.SortStableFunc(md.Instances, func(a, b Instance) int {
		if a.Host != b.Host {
			if a.Host < b.Host {
				return -1
			}
			return 1
		}
		return a.Port - b.Port
	})
	total := 0
	for store, topics := range md.StoreSourceTopics {
		most := 0
		for _, t := range topics {
			most = max(most, md.TopicPartitions[t])
		}
		if total += most; total > maxIndexedPartitions {
			return nil, fmt.Errorf("iq: metadata: stores have more than %d partitions in all (at store %q)", maxIndexedPartitions, store)
		}
	}
	s := &snapshot{md: md, stores: make(map[string]*storeIndex, len(md.StoreSourceTopics))}
	for store, topics := range md.StoreSourceTopics {
		s.stores[store] = indexStore(store, topics, md)
	}
	return s, nil
}

// indexStore precomputes the Route of every partition of one store, the way
// StreamsMetadataState.keyQueryMetadataForKey finds it per key.
func indexStore(store string, topics []string, md Metadata) *storeIndex {
	idx := &storeIndex{name: store}
	for _, t := range topics {
		if n := md.TopicPartitions[t]; n > idx.maxPartitions {
			idx.maxPartitions, idx.topicWithMostPartitions = n, t
		}
	}
	idx.routes = make([]Route, idx.maxPartitions)
	for p := range idx.routes {
		r := Route{Store: store, Partition: p}
		var active *Replica
		for _, in := range md.Instances {
			if slices.Contains(in.ActiveStores, store) && hasAnyPartition(in.ActivePartitions, topics, p) {
				rep := replicaOf(in, store, p, true)
				active = &rep // the last match wins, as in Java
			}
			if slices.Contains(in.StandbyStores, store) && hasAnyPartition(in.StandbyPartitions, topics, p) {
				r.Standbys = append(r.Standbys, replicaOf(in, store, p, false))
			}
		}
		r.Active = active
		idx.routes[p] = r
	}
	return idx
}

func hasAnyPartition(tps []TopicPartition, topics []string, p int) bool {
	for _, tp := range tps {
		if tp.Partition == p && slices.Contains(topics, tp.Topic) {
			return true
		}
	}
	return false
}

func replicaOf(in Instance, store string, p int, active bool) Replica {
	r := Replica{HostInfo: in.HostInfo, AZ: in.AZ, Active: active}
	if lags, ok := in.Lags[store]; ok {
		r.Lag, r.LagKnown = lags[p]
	}
	return r
}

// metadata returns a copy of the metadata the snapshot was built from,
// with instances ordered by host then port.
func (s *snapshot) metadata() Metadata { return cloneMetadata(s.md) }

// route is Client.Route with partitioner p; nil means Kafka's default. A
// nil snapshot (no metadata yet) reports ErrNotAvailable.
func (s *snapshot) route(store string, key []byte, p func(topic string, key []byte, numPartitions int) int) (Route, error) {
	if s == nil {
		return Route{Store: store, Partition: -1}, &storeError{store, ": no metadata loaded yet (the source has not polled successfully: Start it, and see its LastPoll)", ErrNotAvailable}
	}
	idx := s.stores[store]
	if idx == nil {
		if why, ok := s.md.UnmappedStores[store]; ok {
			return Route{Store: store, Partition: -1}, &storeError{store, ": " + why, ErrStoreTopicsUnknown}
		}
		return Route{Store: store, Partition: -1}, &storeError{store, "", ErrUnknownStore}
	}
	if idx.maxPartitions == 0 {
		return Route{Store: store, Partition: -1}, &storeError{store, ": partition count of source topics unknown", ErrNotAvailable}
	}
	var part int
	if p == nil {
		part = Partition(key, idx.maxPartitions)
	} else {
		part = p(idx.topicWithMostPartitions, key, idx.maxPartitions)
		if part < 0 || part >= idx.maxPartitions {
			return Route{Store: store, Partition: -1}, &storeError{store, fmt.Sprintf(": partitioner returned partition %d for topic %q with %d partitions", part, idx.topicWithMostPartitions, idx.maxPartitions), nil}
		}
	}
	r := idx.routes[part]
	if r.Active == nil {
		return r, &storeError{store, fmt.Sprintf(" partition %d: no active instance", part), ErrNotAvailable}
	}
	return r, nil
}

func cloneMetadata(md Metadata) Metadata {
	out := Metadata{
		StoreSourceTopics: make(map[string][]string, len(md.StoreSourceTopics)),
		TopicPartitions:   make(map[string]int, len(md.TopicPartitions)),
		Instances:         make([]Instance, len(md.Instances)),
	}
	for k, v := range md.StoreSourceTopics {
		out.StoreSourceTopics[k] = slices.Clone(v)
	}
	for k, v := range md.TopicPartitions {
		out.TopicPartitions[k] = v
	}
	if md.UnmappedStores != nil {
		out.UnmappedStores = make(map[string]string, len(md.UnmappedStores))
		for k, v := range md.UnmappedStores {
			out.UnmappedStores[k] = v
		}
	}
	for i, in := range md.Instances {
		c := in
		c.ActiveStores = slices.Clone(in.ActiveStores)
		c.ActivePartitions = slices.Clone(in.ActivePartitions)
		c.StandbyStores = slices.Clone(in.StandbyStores)
		c.StandbyPartitions = slices.Clone(in.StandbyPartitions)
		if in.Lags != nil {
			c.Lags = make(map[string]map[int]Lag, len(in.Lags))
			for s, m := range in.Lags {
				cm := make(map[int]Lag, len(m))
				for p, l := range m {
					cm[p] = l
				}
				c.Lags[s] = cm
			}
		}
		out.Instances[i] = c
	}
	return out
}
