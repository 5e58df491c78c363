//go:build conformance

package conformance

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/azsim"
	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/sdk"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The simulator's stories on a real Kafka 4.3.1 broker. Consumer-group
// timings respect the broker's defaults: group.min.session.timeout.ms is
// 6s, so the readers use a 6s session timeout.

const azsimWithFlag = "warpstream_session_id=3f1e,warpstream_az=az-b,warpstream_interzone_lb=true"

func azsimWriter(topic, clientID string, useSDK bool, metadataTTL time.Duration) func([]string) (azsim.Producer, error) {
	return func(bootstrap []string) (azsim.Producer, error) {
		w := &kafka.Writer{Addr: kafka.TCP(bootstrap...), Topic: topic, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll,
			Transport: &kafka.Transport{ClientID: clientID, MetadataTTL: metadataTTL, DialTimeout: 5 * time.Second}}
		if !useSDK {
			return w, nil
		}
		return sdk.NewWriter(w, azsimSDKOptions()...)
	}
}

func azsimReader(topic, group, clientID string, useSDK bool) func([]string) (azsim.Consumer, error) {
	return func(bootstrap []string) (azsim.Consumer, error) {
		cfg := kafka.ReaderConfig{
			Brokers: bootstrap, Topic: topic, GroupID: group,
			Dialer:            &kafka.Dialer{ClientID: clientID, Timeout: 5 * time.Second},
			StartOffset:       kafka.FirstOffset,
			MaxWait:           100 * time.Millisecond,
			HeartbeatInterval: 500 * time.Millisecond,
			SessionTimeout:    6 * time.Second,
			RebalanceTimeout:  6 * time.Second,
			JoinGroupBackoff:  100 * time.Millisecond,
			ReadBackoffMin:    10 * time.Millisecond,
			ReadBackoffMax:    100 * time.Millisecond,
		}
		if !useSDK {
			return kafka.NewReader(cfg), nil
		}
		return sdk.NewReader(cfg, azsimSDKOptions()...)
	}
}

func azsimSDKOptions() []sdk.Option {
	return []sdk.Option{sdk.WithAZ("az-b"), sdk.WithGetenv(func(string) string { return "" }),
		sdk.WithLogger(slog.New(slog.DiscardHandler))}
}

// TestAZSimStories runs stories a, b and c through the simulator in front
// of the real broker.
func TestAZSimStories(t *testing.T) {
	addrs := brokers(t)
	cases := []struct {
		name        string
		clientID    string
		sdk         bool
		removeLocal bool
		// want converged: "yes", "no" or "any".
		fetch, produce string
		// maySkip: the raw kafka-go stories are controls: a raw
		// consumer-group Reader can skip a stored message under repeated
		// closes (see the sdk Reader's documentation); the skip is logged and
		// counted, not failed. The sdk stories may never skip.
		maySkip bool
	}{
		{"a/sdk", "", true, false, "yes", "yes", false},
		{"b/sdk-remove-local", "", true, true, "yes", "yes", false},
		{"a/plain-with-flag", azsimWithFlag, false, false, "yes", "yes", true},
		{"c/plain", "plain-app", false, false, "no", "any", true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			// Settle bounds the waits for the clients to move; a client
			// that is not expected to move uses it up, so it is short there.
			settle := 30 * time.Second
			if tc.fetch != "yes" {
				settle = 5 * time.Second
			}
			topic := fmt.Sprintf("azkafka-azsim-%d-%d", i, time.Now().UnixNano())
			createTopic(t, ctx, addrs, topic, 3)
			rep, err := azsim.Story{
				Backend:     addrs[0],
				Topic:       topic,
				Before:      time.Second,
				After:       4 * time.Second,
				Settle:      settle,
				RemoveLocal: tc.removeLocal,
				Drain:       60 * time.Second,
				NewProducer: azsimWriter(topic, tc.clientID, tc.sdk, 300*time.Millisecond),
				NewConsumer: azsimReader(topic, topic+"-g", tc.clientID, tc.sdk),
				Locate:      func(string) string { return "az-b" },
			}.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			deliverytest.CheckStory(t, tc.name, rep, deliverytest.StoryWant{
				FetchConverges: tc.fetch, ProduceConverges: tc.produce,
				RemoveLocal: tc.removeLocal, NoFailedWrites: tc.sdk, MaySkipStored: tc.maySkip,
				NoDuplicates: tc.sdk, // the sdk Writer is idempotent (acks=all)
			})
		})
	}
}

// TestAZSimDiscoveryVersions sends every Metadata and FindCoordinator
// version the real broker and kmsg both support through an agent and
// checks the rewritten answer names only agents of the client's AZ.
func TestAZSimDiscoveryVersions(t *testing.T) {
	addrs := brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := fmt.Sprintf("azkafka-azsim-disco-%d", time.Now().UnixNano())
	createTopic(t, ctx, addrs, topic, 4)
	sim, err := azsim.Start(addrs[0], azsim.Interval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	var agents []*azsim.Agent
	for _, az := range []string{"az-a", "az-b", "az-b"} {
		a, err := sim.AddAgent(az)
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
	}
	byID := map[int32]*azsim.Agent{}
	for _, a := range agents {
		byID[a.ID()] = a
	}
	versions := apiVersions(t, addrs[0])
	clientID := "warpstream_az=az-b"

	md := versions[3]
	for v := md[0]; v <= min(md[1], kmsg.NewPtrMetadataRequest().MaxVersion()); v++ {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(v)
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp := rawRoundTrip(t, agents[0].Addr(), clientID, req).(*kmsg.MetadataResponse)
		var got []int32
		for _, b := range resp.Brokers {
			got = append(got, b.NodeID)
			if a := byID[b.NodeID]; a == nil || a.AZ() != "az-b" || net.JoinHostPort(b.Host, fmt.Sprint(b.Port)) != a.Addr() {
				t.Fatalf("metadata v%d: broker %+v is not an az-b agent", v, b)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, []int32{agents[1].ID(), agents[2].ID()}) {
			t.Fatalf("metadata v%d: brokers %v, want the two az-b agents", v, got)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 4 {
			t.Fatalf("metadata v%d: topics %+v", v, resp.Topics)
		}
		leaders := map[int32]bool{}
		for _, p := range resp.Topics[0].Partitions {
			leaders[p.Leader] = true
		}
		if len(leaders) != 2 || !leaders[agents[1].ID()] || !leaders[agents[2].ID()] {
			t.Fatalf("metadata v%d: leaders %v, want both az-b agents", v, leaders)
		}
	}
	fc := versions[10]
	for v := fc[0]; v <= min(fc[1], kmsg.NewPtrFindCoordinatorRequest().MaxVersion()); v++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(v)
		req.CoordinatorKey = topic + "-g"
		req.CoordinatorKeys = []string{topic + "-g1", topic + "-g2"}
		resp := rawRoundTrip(t, agents[0].Addr(), clientID, req).(*kmsg.FindCoordinatorResponse)
		type co struct {
			id   int32
			host string
			port int32
			code int16
		}
		var cos []co
		if v < 4 {
			cos = append(cos, co{resp.NodeID, resp.Host, resp.Port, resp.ErrorCode})
		}
		for _, c := range resp.Coordinators {
			cos = append(cos, co{c.NodeID, c.Host, c.Port, c.ErrorCode})
		}
		if len(cos) == 0 {
			t.Fatalf("find coordinator v%d: no coordinator", v)
		}
		for _, c := range cos {
			if c.code != 0 {
				// The broker may still be loading the offsets topic.
				t.Logf("find coordinator v%d: error code %d (not rewritten)", v, c.code)
				continue
			}
			if a := byID[c.id]; a == nil || a.AZ() != "az-b" || net.JoinHostPort(c.host, fmt.Sprint(c.port)) != a.Addr() {
				t.Fatalf("find coordinator v%d: %+v is not an az-b agent", v, c)
			}
		}
	}
}

// apiVersions returns the broker's [min, max] version per key.
func apiVersions(t *testing.T, addr string) map[int16][2]int16 {
	resp := rawRoundTrip(t, addr, "azkafka-conformance", kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	out := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		out[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	return out
}

// rawRoundTrip sends one request on a fresh connection and decodes the
// response.
func rawRoundTrip(t *testing.T, addr, clientID string, req kmsg.Request) kmsg.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kproxy.RoundTrip(ctx, addr, clientID, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
