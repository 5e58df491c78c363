//go:build conformance

package conformance

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/azkafka/azkafka/internal/kframe"
)

// BenchmarkOffsetCommitPath measures one OffsetCommit round trip to the
// group coordinator of run.sh's broker (a simple commit: generation -1,
// one partition, v8), the same request two ways: path=engine through
// the engine's request path (kgo's Client.Request, which the Reader's
// commits take when they cannot go on its own connection: the request
// goes to the broker's writer goroutine, the response is read by another), and path=conn written
// and read on the caller's goroutine over a connection of its own, as
// kafka-go's commit loop does (kframe.Request, which the Reader's own
// coordinator connection uses). The difference is what a commit per
// message pays for the engine's path:
//
//	AZKAFKA_CONFORMANCE_BROKERS=host:port go test -tags conformance -run '^$' \
//	    -bench BenchmarkOffsetCommitPath -count 6 ./conformance
func BenchmarkOffsetCommitPath(b *testing.B) {
	addrs := brokers(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("azkafka-commitpath-%d", time.Now().UnixNano())
	group := topic
	createTopic(b, ctx, addrs, topic, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.MaxVersions(kversion.V3_8_0()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	commit := func(offset int64) *kmsg.OffsetCommitRequest {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.SetVersion(8)
		req.Group, req.Generation = group, -1
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic = topic
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Offset = offset
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		return req
	}
	check := func(resp *kmsg.OffsetCommitResponse) {
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			b.Fatalf("OffsetCommit answered %d topics", len(resp.Topics))
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			b.Fatalf("OffsetCommit: error code %d", code)
		}
	}
	coordinator := findCoordinator(ctx, b, cl, group)
	b.Run("path=engine", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			resp, err := commit(int64(i)).RequestWith(ctx, cl)
			if err != nil {
				b.Fatal(err)
			}
			check(resp)
		}
	})
	b.Run("path=conn", func(b *testing.B) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", coordinator)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		for i := 0; b.Loop(); i++ {
			resp, err := kframe.Request(c, "", int32(i), commit(int64(i)))
			if err != nil {
				b.Fatal(err)
			}
			check(resp.(*kmsg.OffsetCommitResponse))
		}
	})
}

// findCoordinator asks cl for group's coordinator until one is there and
// returns its address.
func findCoordinator(ctx context.Context, tb testing.TB, cl *kgo.Client, group string) string {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorKeys = group, []string{group}
	for ctx.Err() == nil {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			tb.Fatal(err)
		}
		host, port, code := resp.Host, resp.Port, resp.ErrorCode
		if len(resp.Coordinators) > 0 {
			c := resp.Coordinators[0]
			host, port, code = c.Host, c.Port, c.ErrorCode
		}
		if code == 0 && host != "" {
			return net.JoinHostPort(host, strconv.Itoa(int(port)))
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Fatalf("no coordinator for group %s: %v", group, ctx.Err())
	return ""
}
