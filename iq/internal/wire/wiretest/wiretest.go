// Package wiretest encodes what package wire decodes, as Kafka Streams and
// the consumer protocol write it, so that decoder and group tests do not
// depend on captured bytes alone; and it holds bytes captured from Kafka
// Streams 4.3.1. It is imported by tests only.
package wiretest

import (
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"sort"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/azkafka/azkafka/iq/internal/wire"
)

//go:embed streams-4.3.1-classic-member.txt
var captured string

// CapturedMember returns the member metadata and assignment of one member
// of a Kafka Streams 4.3.1 application (see the header of
// streams-4.3.1-classic-member.txt).
func CapturedMember(t testing.TB) (metadata, assignment []byte) {
	t.Helper()
	var err error
	for _, l := range strings.Split(captured, "\n") {
		if v, ok := strings.CutPrefix(l, "metadata "); ok {
			metadata, err = hex.DecodeString(v)
		} else if v, ok := strings.CutPrefix(l, "assignment "); ok {
			assignment, err = hex.DecodeString(v)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return metadata, assignment
}

// wireWriter builds the bytes Kafka Streams and the consumer protocol
// write, so that decoder tests do not depend on captured bytes alone.
type wireWriter struct{ b []byte }

func (w *wireWriter) i8(v int8)   { w.b = append(w.b, byte(v)) }
func (w *wireWriter) i16(v int16) { w.b = binary.BigEndian.AppendUint16(w.b, uint16(v)) }
func (w *wireWriter) i32(v int32) { w.b = binary.BigEndian.AppendUint32(w.b, uint32(v)) }
func (w *wireWriter) i64(v int64) { w.b = binary.BigEndian.AppendUint64(w.b, uint64(v)) }
func (w *wireWriter) str16(s string) {
	w.i16(int16(len(s)))
	w.b = append(w.b, s...)
}
func (w *wireWriter) bytes32(b []byte) {
	if b == nil {
		w.i32(-1)
		return
	}
	w.i32(int32(len(b)))
	w.b = append(w.b, b...)
}

// javaUTF writes as DataOutputStream.writeUTF: modified UTF-8.
func (w *wireWriter) javaUTF(s string) {
	var enc []byte
	for _, u := range utf16.Encode([]rune(s)) {
		switch {
		case u != 0 && u < 0x80:
			enc = append(enc, byte(u))
		case u < 0x800:
			enc = append(enc, 0xc0|byte(u>>6), 0x80|byte(u&0x3f))
		default:
			enc = append(enc, 0xe0|byte(u>>12), 0x80|byte(u>>6&0x3f), 0x80|byte(u&0x3f))
		}
	}
	w.b = binary.BigEndian.AppendUint16(w.b, uint16(len(enc)))
	w.b = append(w.b, enc...)
}

func (w *wireWriter) taskID(t wire.TaskID, version int32) {
	w.i32(t.Subtopology)
	w.i32(t.Partition)
	if version >= 10 {
		u := utf16.Encode([]rune(t.Topology))
		w.i32(int32(len(u)))
		for _, c := range u {
			w.b = binary.BigEndian.AppendUint16(w.b, c)
		}
	}
}

// EncodeAssignmentInfo writes a as AssignmentInfo.encode does for a.Version.
func EncodeAssignmentInfo(a *wire.AssignmentInfo) []byte {
	w := &wireWriter{}
	v := a.Version
	w.i32(v)
	if v >= 3 {
		w.i32(a.LatestSupportedVersion)
	}
	w.i32(int32(len(a.ActiveTasks)))
	for _, t := range a.ActiveTasks {
		w.taskID(t, v)
	}
	w.i32(int32(len(a.StandbyTasks)))
	for _, s := range a.StandbyTasks {
		w.taskID(s.Task, v)
		w.i32(int32(len(s.Partitions)))
		for _, tp := range s.Partitions {
			w.javaUTF(tp.Topic)
			w.i32(int32(tp.Partition))
		}
	}
	switch {
	case v == 1:
	case v <= 4:
		w.i32(int32(len(a.PartitionsByHost)))
		for _, hp := range a.PartitionsByHost {
			w.javaUTF(hp.Host.Host)
			w.i32(int32(hp.Host.Port))
			w.i32(int32(len(hp.Partitions)))
			for _, tp := range hp.Partitions {
				w.javaUTF(tp.Topic)
				w.i32(int32(tp.Partition))
			}
		}
	default:
		maps := [][]wire.HostPartitions{a.PartitionsByHost}
		if v >= 6 {
			maps = append(maps, a.StandbyPartitionsByHost)
		}
		dict := map[string]int32{}
		var names []string
		for _, m := range maps {
			for _, hp := range m {
				for _, tp := range hp.Partitions {
					if _, ok := dict[tp.Topic]; !ok {
						dict[tp.Topic] = int32(len(dict))
						names = append(names, tp.Topic)
					}
				}
			}
		}
		// Java writes a HashMap: any order; write it reversed to prove
		// the decoder does not rely on it.
		sort.Sort(sort.Reverse(sort.StringSlice(names)))
		w.i32(int32(len(names)))
		for _, n := range names {
			w.i32(dict[n])
			w.javaUTF(n)
		}
		for _, m := range maps {
			w.i32(int32(len(m)))
			for _, hp := range m {
				w.javaUTF(hp.Host.Host)
				w.i32(int32(hp.Host.Port))
				w.i32(int32(len(hp.Partitions)))
				for _, tp := range hp.Partitions {
					w.i32(dict[tp.Topic])
					w.i32(int32(tp.Partition))
				}
			}
		}
	}
	if v >= 4 {
		w.i32(a.ErrorCode)
	}
	if v >= 7 {
		w.i64(a.NextRebalanceMs)
	}
	return w.b
}

// EncodeSubscriptionInfo writes s as SubscriptionInfoData does for
// s.Version. For versions 7 to 9 consecutive offset sums of one
// subtopology are grouped, as Java groups them.
func EncodeSubscriptionInfo(s *wire.SubscriptionInfo) []byte {
	w := &wireWriter{}
	v := s.Version
	w.i32(v)
	if v >= 3 {
		w.i32(s.LatestSupportedVersion)
	}
	w.b = append(w.b, s.ProcessID[:]...)
	if v <= 6 {
		for _, ts := range [][]wire.TaskID{s.PrevTasks, s.StandbyTasks} {
			w.i32(int32(len(ts)))
			for _, t := range ts {
				w.i32(t.Subtopology)
				w.i32(t.Partition)
			}
		}
	}
	if v >= 2 {
		w.bytes32([]byte(s.UserEndpoint))
	}
	if v >= 7 {
		if v >= 10 {
			w.i32(int32(len(s.TaskOffsetSums)))
			for _, o := range s.TaskOffsetSums {
				w.i32(o.Task.Subtopology)
				w.i32(o.Task.Partition)
				w.i64(o.OffsetSum)
				if o.Task.Topology == "" {
					w.i16(-1)
				} else {
					w.str16(o.Task.Topology)
				}
			}
		} else {
			var groups [][]wire.TaskOffsetSum
			for _, o := range s.TaskOffsetSums {
				if n := len(groups); n > 0 && groups[n-1][0].Task.Subtopology == o.Task.Subtopology {
					groups[n-1] = append(groups[n-1], o)
				} else {
					groups = append(groups, []wire.TaskOffsetSum{o})
				}
			}
			w.i32(int32(len(groups)))
			for _, g := range groups {
				w.i32(g[0].Task.Subtopology)
				w.i32(int32(len(g)))
				for _, o := range g {
					w.i32(o.Task.Partition)
					w.i64(o.OffsetSum)
				}
			}
		}
	}
	if v >= 8 {
		w.i8(s.UniqueField)
	}
	if v >= 9 {
		w.i32(s.ErrorCode)
	}
	if v >= 11 {
		w.i32(int32(len(s.ClientTags)))
		for _, t := range s.ClientTags {
			w.bytes32([]byte(t.Key))
			w.bytes32([]byte(t.Value))
		}
	}
	return w.b
}

// EncodeConsumerSubscription writes s as the consumer protocol does.
func EncodeConsumerSubscription(s *wire.ConsumerSubscription) []byte {
	w := &wireWriter{}
	w.i16(s.Version)
	w.i32(int32(len(s.Topics)))
	for _, t := range s.Topics {
		w.str16(t)
	}
	w.bytes32(s.UserData)
	if s.Version >= 1 {
		writeTopicPartitionArray(w, s.OwnedPartitions)
	}
	if s.Version >= 2 {
		w.i32(s.GenerationID)
	}
	if s.Version >= 3 {
		if s.RackID == "" {
			w.i16(-1)
		} else {
			w.str16(s.RackID)
		}
	}
	return w.b
}

// EncodeConsumerAssignment writes a as the consumer protocol does.
func EncodeConsumerAssignment(a *wire.ConsumerAssignment) []byte {
	w := &wireWriter{}
	w.i16(a.Version)
	writeTopicPartitionArray(w, a.Partitions)
	w.bytes32(a.UserData)
	return w.b
}

// writeTopicPartitionArray groups consecutive partitions of one topic.
func writeTopicPartitionArray(w *wireWriter, tps []wire.TopicPartition) {
	var topics []string
	parts := map[string][]int32{}
	for _, tp := range tps {
		if _, ok := parts[tp.Topic]; !ok {
			topics = append(topics, tp.Topic)
		}
		parts[tp.Topic] = append(parts[tp.Topic], int32(tp.Partition))
	}
	w.i32(int32(len(topics)))
	for _, t := range topics {
		w.str16(t)
		w.i32(int32(len(parts[t])))
		for _, p := range parts[t] {
			w.i32(p)
		}
	}
}
