package wire

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"unicode/utf8"
)

// HostInfo is a Kafka Streams instance's application.server.
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

// StreamsProtocolLatest is the newest version of Kafka Streams'
// SubscriptionInfo and AssignmentInfo this package decodes: 11, the latest
// of Kafka Streams 4.3.
const StreamsProtocolLatest = 11

// ErrUnsupportedVersion reports a SubscriptionInfo or AssignmentInfo newer
// than StreamsProtocolLatest (a newer Kafka Streams). Test with errors.Is.
var ErrUnsupportedVersion = errors.New("iq: unsupported Kafka Streams assignment protocol version")

// TaskID is a Kafka Streams task: a subtopology (Java's topic group ID) and
// a partition, plus the named topology of the long-removed named-topology
// feature (empty otherwise).
type TaskID struct {
	Subtopology int32
	Partition   int32
	Topology    string
}

// String returns the task as Java prints it: subtopology_partition.
func (t TaskID) String() string {
	s := strconv.Itoa(int(t.Subtopology)) + "_" + strconv.Itoa(int(t.Partition))
	if t.Topology != "" {
		s = t.Topology + "__" + s
	}
	return s
}

// HostPartitions is one entry of AssignmentInfo's partitionsByHost: an
// instance's application.server and its source and changelog partitions.
type HostPartitions struct {
	Host       HostInfo
	Partitions []TopicPartition
}

// StandbyTask is a standby task and its changelog partitions.
type StandbyTask struct {
	Task       TaskID
	Partitions []TopicPartition
}

// AssignmentInfo is Kafka Streams' assignment user data (versions 1 to
// 11), the Java class of the same name: a member's own tasks and, from
// version 2, every instance's partitions. Any one member's AssignmentInfo
// carries the routing of the whole application.
type AssignmentInfo struct {
	Version int32
	// LatestSupportedVersion is the leader's commonly supported version;
	// -1 before version 3.
	LatestSupportedVersion int32
	ActiveTasks            []TaskID
	StandbyTasks           []StandbyTask
	// PartitionsByHost is what StreamsMetadata.topicPartitions reports per
	// instance; StandbyPartitionsByHost (version 6 and later) likewise for
	// standbyTopicPartitions.
	PartitionsByHost        []HostPartitions
	StandbyPartitionsByHost []HostPartitions
	// ErrorCode is the assignor's error (version 4 and later); 0 is none.
	ErrorCode int32
	// NextRebalanceMs is when the leader asks for a probing rebalance, in
	// Unix milliseconds (version 7 and later).
	NextRebalanceMs int64
}

// DecodeAssignmentInfo decodes Kafka Streams' AssignmentInfo as
// AssignmentInfo.decode does in Kafka Streams 4.3. A version above
// StreamsProtocolLatest is an error wrapping ErrUnsupportedVersion; other
// errors name the field and its byte offset.
func DecodeAssignmentInfo(b []byte) (*AssignmentInfo, error) {
	r := &wireReader{b: b}
	a := &AssignmentInfo{LatestSupportedVersion: -1}
	a.Version = r.int32("version")
	if r.err != nil {
		return nil, r.err
	}
	if a.Version < 1 || a.Version > StreamsProtocolLatest {
		return nil, fmt.Errorf("field version: AssignmentInfo version %d, want 1..%d: %w", a.Version, StreamsProtocolLatest, ErrUnsupportedVersion)
	}
	v := a.Version
	if v >= 3 {
		a.LatestSupportedVersion = r.int32("latestSupportedVersion")
	}
	n := r.count("activeTasks", 8, false)
	a.ActiveTasks = make([]TaskID, 0, n)
	for range n {
		a.ActiveTasks = append(a.ActiveTasks, readTaskID(r, &activeTaskFields, v))
	}
	n = r.count("standbyTasks", 12, false)
	a.StandbyTasks = make([]StandbyTask, 0, n)
	for range n {
		t := readTaskID(r, &standbyTaskFields, v)
		a.StandbyTasks = append(a.StandbyTasks, StandbyTask{t, readNamedPartitions(r, &standbyPartitionFields)})
	}
	switch {
	case v == 1:
	case v <= 4:
		n = r.count("partitionsByHost", 10, false)
		for range n {
			h := readHostInfo(r, &hostFields)
			a.PartitionsByHost = append(a.PartitionsByHost, HostPartitions{h, readNamedPartitions(r, &hostPartitionFields)})
		}
	default:
		dict := readTopicDictionary(r)
		a.PartitionsByHost = readHostPartitionsByIndex(r, &activeByHostFields, dict)
		if v >= 6 {
			a.StandbyPartitionsByHost = readHostPartitionsByIndex(r, &standbyByHostFields, dict)
		}
	}
	if v >= 4 {
		a.ErrorCode = r.int32("errorCode")
	}
	if v >= 7 {
		a.NextRebalanceMs = r.int64("nextRebalanceMs")
	}
	if r.err != nil {
		return nil, r.err
	}
	return a, nil
}

// Field names for errors, built once rather than on every read.
type taskFields struct{ subtopology, partition, namedTopology string }
type hostInfoFields struct{ host, port string }
type namedPartitionFields struct{ list, topic, partition string }
type byHostFields struct {
	list       string
	host       hostInfoFields
	partitions string
	topicIndex string
	partition  string
}

func newTaskFields(f string) taskFields {
	return taskFields{f + ".subtopology", f + ".partition", f + ".namedTopology"}
}

func newNamedPartitionFields(f string) namedPartitionFields {
	return namedPartitionFields{f, f + "[].topic", f + "[].partition"}
}

func newByHostFields(f string) byHostFields {
	return byHostFields{f, hostInfoFields{f + "[].host.host", f + "[].host.port"}, f + "[].partitions",
		f + "[].partitions[].topicIndex", f + "[].partitions[].partition"}
}

var (
	activeTaskFields       = newTaskFields("activeTasks[]")
	standbyTaskFields      = newTaskFields("standbyTasks[].task")
	standbyPartitionFields = newNamedPartitionFields("standbyTasks[].partitions")
	hostFields             = hostInfoFields{"partitionsByHost[].host.host", "partitionsByHost[].host.port"}
	hostPartitionFields    = newNamedPartitionFields("partitionsByHost[].partitions")
	activeByHostFields     = newByHostFields("partitionsByHost")
	standbyByHostFields    = newByHostFields("standbyPartitionsByHost")
)

func readTaskID(r *wireReader, f *taskFields, version int32) TaskID {
	t := TaskID{Subtopology: r.int32(f.subtopology), Partition: r.int32(f.partition)}
	if version >= 10 { // named topologies
		n := r.count(f.namedTopology, 2, false)
		if n > 0 {
			t.Topology = r.javaChars(f.namedTopology, n)
		}
	}
	return t
}

func readHostInfo(r *wireReader, f *hostInfoFields) HostInfo {
	return HostInfo{Host: r.javaUTF(f.host), Port: int(r.int32(f.port))}
}

// readNamedPartitions reads [topic UTF, partition INT32] as writeUTF writes
// topic names.
func readNamedPartitions(r *wireReader, f *namedPartitionFields) []TopicPartition {
	n := r.count(f.list, 6, false)
	out := make([]TopicPartition, 0, n)
	for range n {
		t := r.javaUTF(f.topic)
		out = append(out, TopicPartition{t, int(r.int32(f.partition))})
	}
	return out
}

func readTopicDictionary(r *wireReader) map[int32]string {
	n := r.count("topicDictionary", 6, false)
	dict := make(map[int32]string, n)
	for range n {
		i := r.int32("topicDictionary[].index")
		dict[i] = r.javaUTF("topicDictionary[].topic")
	}
	return dict
}

func readHostPartitionsByIndex(r *wireReader, f *byHostFields, dict map[int32]string) []HostPartitions {
	n := r.count(f.list, 10, false)
	out := make([]HostPartitions, 0, n)
	for range n {
		h := readHostInfo(r, &f.host)
		m := r.count(f.partitions, 8, false)
		tps := make([]TopicPartition, 0, m)
		for range m {
			start := r.off
			i := r.int32(f.topicIndex)
			p := r.int32(f.partition)
			t, ok := dict[i]
			if !ok && r.err == nil {
				r.off = start
				r.fail(f.topicIndex, "index %d is not in the topic dictionary", i)
			}
			tps = append(tps, TopicPartition{t, int(p)})
		}
		out = append(out, HostPartitions{h, tps})
	}
	return out
}

// TaskOffsetSum is a task and the sum of its changelog offsets a member
// reported when it joined: Kafka Streams' Task.LATEST_OFFSET (-2) for a
// task running active, the checkpointed offsets for any other copy.
type TaskOffsetSum struct {
	Task      TaskID
	OffsetSum int64
}

// LatestOffset is the OffsetSum a member reports for a task it runs as
// active (Java's Task.LATEST_OFFSET).
const LatestOffset = -2

// SubscriptionInfo is Kafka Streams' subscription user data (versions 1 to
// 11), the member metadata of a Streams member in a classic group.
type SubscriptionInfo struct {
	Version int32
	// LatestSupportedVersion is -1 before version 3.
	LatestSupportedVersion int32
	// ProcessID identifies the Kafka Streams instance (all its threads).
	ProcessID [16]byte
	// PrevTasks and StandbyTasks are filled up to version 6; later
	// versions report TaskOffsetSums instead.
	PrevTasks    []TaskID
	StandbyTasks []TaskID
	// UserEndpoint is the application.server setting, "host:port"; empty
	// when not set (version 2 and later).
	UserEndpoint   string
	TaskOffsetSums []TaskOffsetSum // version 7 and later
	UniqueField    int8            // version 8 and later
	ErrorCode      int32           // version 9 and later
	// ClientTags are the client.tag.* settings (version 11), in the order
	// the member sent them.
	ClientTags []ClientTag
}

// ClientTag is one client.tag.<key>=<value> setting of a Streams instance.
type ClientTag struct{ Key, Value string }

// ProcessIDString returns ProcessID in the UUID text form Java prints.
func (s *SubscriptionInfo) ProcessIDString() string {
	const hex = "0123456789abcdef"
	var b [36]byte
	j := 0
	for i, c := range s.ProcessID {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b[j] = '-'
			j++
		}
		b[j], b[j+1] = hex[c>>4], hex[c&15]
		j += 2
	}
	return string(b[:])
}

// Tag returns the value of client tag key and whether it is set.
func (s *SubscriptionInfo) Tag(key string) (string, bool) {
	for _, t := range s.ClientTags {
		if t.Key == key {
			return t.Value, true
		}
	}
	return "", false
}

// Endpoint parses UserEndpoint as host:port.
func (s *SubscriptionInfo) Endpoint() (HostInfo, error) {
	return parseEndpoint(s.UserEndpoint)
}

func parseEndpoint(ep string) (HostInfo, error) {
	host, ps, err := net.SplitHostPort(ep)
	if err != nil {
		return HostInfo{}, fmt.Errorf("field userEndPoint: %s: not host:port", Quote(ep))
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port <= 0 || port > 65535 || host == "" {
		return HostInfo{}, fmt.Errorf("field userEndPoint: %s: not host:port with a port in 1..65535", Quote(ep))
	}
	return HostInfo{host, port}, nil
}

// DecodeSubscriptionInfo decodes Kafka Streams' SubscriptionInfo as
// SubscriptionInfo.decode does in Kafka Streams 4.3. A version above
// StreamsProtocolLatest is an error wrapping ErrUnsupportedVersion; other
// errors name the field and its byte offset.
func DecodeSubscriptionInfo(b []byte) (*SubscriptionInfo, error) {
	r := &wireReader{b: b}
	s := &SubscriptionInfo{LatestSupportedVersion: -1}
	s.Version = r.int32("version")
	if r.err != nil {
		return nil, r.err
	}
	if s.Version < 1 || s.Version > StreamsProtocolLatest {
		return nil, fmt.Errorf("field version: SubscriptionInfo version %d, want 1..%d: %w", s.Version, StreamsProtocolLatest, ErrUnsupportedVersion)
	}
	v := s.Version
	if v >= 3 {
		s.LatestSupportedVersion = r.int32("latestSupportedVersion")
	}
	copy(s.ProcessID[:], r.take("processId", 16))
	if v <= 6 {
		for _, f := range []struct {
			name string
			dst  *[]TaskID
		}{{"prevTasks", &s.PrevTasks}, {"standbyTasks", &s.StandbyTasks}} {
			n := r.count(f.name, 8, false)
			for range n {
				*f.dst = append(*f.dst, TaskID{Subtopology: r.int32(f.name + "[].subtopology"), Partition: r.int32(f.name + "[].partition")})
			}
		}
	}
	if v >= 2 {
		ep, _ := r.bytes32("userEndPoint", false)
		if r.err == nil && !utf8.Valid(ep) {
			return nil, fmt.Errorf("field userEndPoint: not UTF-8: %q", truncate(string(ep), 64))
		}
		s.UserEndpoint = string(ep)
	}
	if v >= 7 {
		n := r.count("taskOffsetSums", 4, false)
		for range n {
			sub := r.int32("taskOffsetSums[].subtopology")
			if v >= 10 {
				t := TaskID{Subtopology: sub, Partition: r.int32("taskOffsetSums[].partition")}
				off := r.int64("taskOffsetSums[].offsetSum")
				t.Topology, _ = r.string16("taskOffsetSums[].namedTopology", true)
				s.TaskOffsetSums = append(s.TaskOffsetSums, TaskOffsetSum{t, off})
				continue
			}
			m := r.count("taskOffsetSums[].partitionToOffsetSum", 12, false)
			for range m {
				p := r.int32("taskOffsetSums[].partitionToOffsetSum[].partition")
				off := r.int64("taskOffsetSums[].partitionToOffsetSum[].offsetSum")
				s.TaskOffsetSums = append(s.TaskOffsetSums, TaskOffsetSum{TaskID{Subtopology: sub, Partition: p}, off})
			}
		}
	}
	if v >= 8 {
		s.UniqueField = r.int8("uniqueField")
	}
	if v >= 9 {
		s.ErrorCode = r.int32("errorCode")
	}
	if v >= 11 {
		n := r.count("clientTags", 8, false)
		for range n {
			k, _ := r.bytes32("clientTags[].key", false)
			val, _ := r.bytes32("clientTags[].value", false)
			s.ClientTags = append(s.ClientTags, ClientTag{string(k), string(val)})
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return s, nil
}
