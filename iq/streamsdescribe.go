package iq

import (
	"encoding/binary"
	"fmt"
)

// StreamsGroupDescribeKey is the API key of StreamsGroupDescribe (KIP-1071),
// which describes a group on the streams rebalance protocol.
const StreamsGroupDescribeKey = 89

// StreamsGroup is one group of a StreamsGroupDescribe response (version 0),
// the fields this package uses.
type StreamsGroup struct {
	ErrorCode    int16
	ErrorMessage string
	GroupID      string
	GroupState   string
	// Subtopologies is the topology's; nil when the group has none yet.
	Subtopologies []StreamsSubtopology
	Members       []StreamsMember
}

// StreamsSubtopology is one subtopology of a streams group's topology.
type StreamsSubtopology struct {
	ID                      string
	SourceTopics            []string
	RepartitionSourceTopics []StreamsTopicInfo
	StateChangelogTopics    []StreamsTopicInfo
}

// StreamsTopicInfo is an internal topic of a subtopology.
type StreamsTopicInfo struct {
	Name       string
	Partitions int32
}

// StreamsMember is one member (one Kafka Streams instance) of a streams
// group.
type StreamsMember struct {
	MemberID  string
	RackID    string
	ClientID  string
	ProcessID string
	// Endpoint is the application.server; zero when not set.
	Endpoint   HostInfo
	ClientTags []ClientTag
	// Active, Standby and Warmup are the member's current assignment, as
	// subtopology ID and partitions.
	Active, Standby, Warmup []StreamsTasks
}

// StreamsTasks are the tasks of one subtopology.
type StreamsTasks struct {
	Subtopology string
	Partitions  []int32
}

// DecodeStreamsGroupDescribe decodes the body of a StreamsGroupDescribe
// response, version 0 (after the response header). Errors name the field
// and its byte offset.
func DecodeStreamsGroupDescribe(b []byte) ([]StreamsGroup, error) {
	r := &wireReader{b: b}
	r.int32("throttleTimeMs")
	n := r.compactLen("groups", 10)
	var out []StreamsGroup
	for range max(n, 0) {
		var g StreamsGroup
		g.ErrorCode = r.int16("groups[].errorCode")
		g.ErrorMessage, _ = r.compactString("groups[].errorMessage")
		g.GroupID, _ = r.compactString("groups[].groupId")
		g.GroupState, _ = r.compactString("groups[].groupState")
		r.int32("groups[].groupEpoch")
		r.int32("groups[].assignmentEpoch")
		if r.int8("groups[].topology") >= 0 {
			r.int32("groups[].topology.epoch")
			m := r.compactLen("groups[].topology.subtopologies", 5)
			for range max(m, 0) {
				g.Subtopologies = append(g.Subtopologies, readSubtopology(r))
			}
			r.taggedFields("groups[].topology")
		}
		m := r.compactLen("groups[].members", 20)
		for range max(m, 0) {
			g.Members = append(g.Members, readStreamsMember(r))
		}
		r.int32("groups[].authorizedOperations")
		r.taggedFields("groups[]")
		if r.err != nil {
			return nil, r.err
		}
		out = append(out, g)
	}
	r.taggedFields("response")
	if r.err != nil {
		return nil, r.err
	}
	return out, nil
}

func readStrings(r *wireReader, field string) []string {
	n := r.compactLen(field, 1)
	var out []string
	for range max(n, 0) {
		s, _ := r.compactString(field + "[]")
		out = append(out, s)
	}
	return out
}

func readTopicInfos(r *wireReader, field string) []StreamsTopicInfo {
	n := r.compactLen(field, 8)
	var out []StreamsTopicInfo
	for range max(n, 0) {
		var t StreamsTopicInfo
		t.Name, _ = r.compactString(field + "[].name")
		t.Partitions = r.int32(field + "[].partitions")
		r.int16(field + "[].replicationFactor")
		readKeyValues(r, field+"[].topicConfigs")
		r.taggedFields(field + "[]")
		out = append(out, t)
	}
	return out
}

func readKeyValues(r *wireReader, field string) []ClientTag {
	n := r.compactLen(field, 3)
	var out []ClientTag
	for range max(n, 0) {
		k, _ := r.compactString(field + "[].key")
		v, _ := r.compactString(field + "[].value")
		r.taggedFields(field + "[]")
		out = append(out, ClientTag{k, v})
	}
	return out
}

func readSubtopology(r *wireReader) StreamsSubtopology {
	const f = "groups[].topology.subtopologies[]"
	var s StreamsSubtopology
	s.ID, _ = r.compactString(f + ".subtopologyId")
	s.SourceTopics = readStrings(r, f+".sourceTopics")
	readStrings(r, f+".repartitionSinkTopics")
	s.StateChangelogTopics = readTopicInfos(r, f+".stateChangelogTopics")
	s.RepartitionSourceTopics = readTopicInfos(r, f+".repartitionSourceTopics")
	r.taggedFields(f)
	return s
}

func readTaskIDs(r *wireReader, field string) []StreamsTasks {
	n := r.compactLen(field, 3)
	var out []StreamsTasks
	for range max(n, 0) {
		var t StreamsTasks
		t.Subtopology, _ = r.compactString(field + "[].subtopologyId")
		m := r.compactLen(field+"[].partitions", 4)
		for range max(m, 0) {
			t.Partitions = append(t.Partitions, r.int32(field+"[].partitions[]"))
		}
		r.taggedFields(field + "[]")
		out = append(out, t)
	}
	return out
}

func readStreamsMember(r *wireReader) StreamsMember {
	const f = "groups[].members[]"
	var m StreamsMember
	m.MemberID, _ = r.compactString(f + ".memberId")
	r.int32(f + ".memberEpoch")
	r.compactString(f + ".instanceId")
	m.RackID, _ = r.compactString(f + ".rackId")
	m.ClientID, _ = r.compactString(f + ".clientId")
	r.compactString(f + ".clientHost")
	r.int32(f + ".topologyEpoch")
	m.ProcessID, _ = r.compactString(f + ".processId")
	if r.int8(f+".userEndpoint") >= 0 {
		m.Endpoint.Host, _ = r.compactString(f + ".userEndpoint.host")
		m.Endpoint.Port = int(uint16(r.int16(f + ".userEndpoint.port")))
		r.taggedFields(f + ".userEndpoint")
	}
	m.ClientTags = readKeyValues(r, f+".clientTags")
	for _, name := range []string{".taskOffsets", ".taskEndOffsets"} {
		n := r.compactLen(f+name, 14)
		for range max(n, 0) {
			r.compactString(f + name + "[].subtopologyId")
			r.int32(f + name + "[].partition")
			r.int64(f + name + "[].offset")
			r.taggedFields(f + name + "[]")
		}
	}
	m.Active = readTaskIDs(r, f+".assignment.activeTasks")
	m.Standby = readTaskIDs(r, f+".assignment.standbyTasks")
	m.Warmup = readTaskIDs(r, f+".assignment.warmupTasks")
	r.taggedFields(f + ".assignment")
	for _, name := range []string{".activeTasks", ".standbyTasks", ".warmupTasks"} {
		readTaskIDs(r, f+".targetAssignment"+name)
	}
	r.taggedFields(f + ".targetAssignment")
	r.int8(f + ".isClassic")
	r.taggedFields(f)
	return m
}

// appendStreamsGroupDescribeRequest appends a framed StreamsGroupDescribe
// v0 request for group (request header v2) to dst.
func appendStreamsGroupDescribeRequest(dst []byte, correlationID int32, clientID, group string) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0) // size, set below
	dst = binary.BigEndian.AppendUint16(dst, StreamsGroupDescribeKey)
	dst = binary.BigEndian.AppendUint16(dst, 0) // version
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(clientID)))
	dst = append(dst, clientID...)
	dst = append(dst, 0)                                  // header tagged fields
	dst = binary.AppendUvarint(dst, 2)                    // one group
	dst = binary.AppendUvarint(dst, uint64(len(group)+1)) // compact string
	dst = append(dst, group...)                           //
	dst = append(dst, 0)                                  // includeAuthorizedOperations
	dst = append(dst, 0)                                  // tagged fields
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// kafkaErrorName names the error codes a StreamsGroupDescribe may carry.
func kafkaErrorName(code int16) string {
	switch code {
	case 15:
		return "COORDINATOR_NOT_AVAILABLE"
	case 14:
		return "COORDINATOR_LOAD_IN_PROGRESS"
	case 16:
		return "NOT_COORDINATOR"
	case 30:
		return "GROUP_AUTHORIZATION_FAILED"
	case 35:
		return "UNSUPPORTED_VERSION"
	case 69:
		return "GROUP_ID_NOT_FOUND"
	}
	return fmt.Sprintf("error code %d", code)
}
