package wire_test

import (
	"fmt"
	"testing"

	"github.com/azkafka/azkafka/iq/internal/wire"
	"github.com/azkafka/azkafka/iq/internal/wire/wiretest"
)

// benchAssignmentInfo is an AssignmentInfo v11 of an application with n
// instances, each active for 64 partitions and standby for 64 others,
// spread over four source topics.
func benchAssignmentInfo(n int) []byte {
	a := &wire.AssignmentInfo{Version: 11, LatestSupportedVersion: 11}
	topics := []string{"orders", "payments", "app-rekey-repartition", "customers"}
	for i := range n {
		h := wire.HostInfo{fmt.Sprintf("streams-%d.streams.svc.cluster.local", i), 7070}
		var act, sb []wire.TopicPartition
		for j := range 64 {
			act = append(act, wire.TopicPartition{topics[j%4], i*64 + j})
			sb = append(sb, wire.TopicPartition{topics[j%4], ((i+1)%n)*64 + j})
		}
		a.PartitionsByHost = append(a.PartitionsByHost, wire.HostPartitions{h, act})
		a.StandbyPartitionsByHost = append(a.StandbyPartitionsByHost, wire.HostPartitions{h, sb})
	}
	for j := range 64 {
		a.ActiveTasks = append(a.ActiveTasks, wire.TaskID{Subtopology: int32(j % 4), Partition: int32(j)})
	}
	return wiretest.EncodeAssignmentInfo(a)
}

func BenchmarkDecodeAssignmentInfo(b *testing.B) {
	for _, n := range []int{3, 100} {
		buf := benchAssignmentInfo(n)
		b.Run(fmt.Sprintf("instances=%d/partitions=64", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				if _, err := wire.DecodeAssignmentInfo(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
