package azsim_test

import (
	"context"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/azsim"
	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/segmentio/kafka-go"
)

const storyTopic = "story"

// plainWriter builds a kafka-go Writer with a hand-set client ID.
// metadataTTL 0 keeps kafka-go's default (6s).
func plainWriter(clientID string, metadataTTL time.Duration) func([]string) (azsim.Producer, error) {
	return func(bootstrap []string) (azsim.Producer, error) {
		return &kafka.Writer{
			Addr: kafka.TCP(bootstrap...), Topic: storyTopic,
			BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll,
			Transport: &kafka.Transport{ClientID: clientID, DialTimeout: 2 * time.Second, MetadataTTL: metadataTTL},
		}, nil
	}
}

// plainReader builds a kafka-go consumer-group Reader with a hand-set
// client ID and short group timings.
func plainReader(clientID, group string) func([]string) (azsim.Consumer, error) {
	return func(bootstrap []string) (azsim.Consumer, error) {
		return kafka.NewReader(kafka.ReaderConfig{
			Brokers: bootstrap, Topic: storyTopic, GroupID: group,
			Dialer:            &kafka.Dialer{ClientID: clientID, Timeout: 2 * time.Second},
			StartOffset:       kafka.FirstOffset,
			MaxWait:           100 * time.Millisecond,
			HeartbeatInterval: 100 * time.Millisecond,
			SessionTimeout:    time.Second,
			RebalanceTimeout:  time.Second,
			JoinGroupBackoff:  100 * time.Millisecond,
			ReadBackoffMin:    10 * time.Millisecond,
			ReadBackoffMax:    100 * time.Millisecond,
		}), nil
	}
}

func TestStoryPlainClients(t *testing.T) {
	const withFlag = "warpstream_session_id=7b0c,warpstream_az=az-b,warpstream_interzone_lb=true"
	cases := []struct {
		name        string
		clientID    string
		metadataTTL time.Duration
		// Whether cross-AZ fetch / produce bytes stopped in the settled
		// window: "yes", "no", or "any" when it depends on the timing of
		// kafka-go's random metadata refresh (uniform in [0, MetadataTTL)).
		fetchConverges, produceConverges string
		wantLBCloses                     bool
		// maySkip: a plain kafka-go consumer-group Reader whose connections
		// keep being closed may skip a stored message (seen about once in
		// ten runs: it commits, after a rejoin, offsets of messages fetched
		// in the previous generation). Such a loss must be consumer-side:
		// the message is on the broker.
		maySkip bool
	}{
		// c) plain kafka-go, no AZ, no flag: the reader never moves.
		{"c/plain", "plain-app", 0, "no", "any", false, false},
		// AZ stamped without the interzone flag: no agent closes it (what
		// the case shows). The clients move only if they happen to
		// rediscover: the writer when its metadata refreshes, the reader
		// after a group rebalance (a loaded machine can miss a heartbeat).
		{"c/az-no-flag", "warpstream_session_id=7b0c,warpstream_az=az-b", 0, "any", "any", false, false},
		// a) raw kafka-go with the flag stamped by hand: the closed reader
		// rediscovers; the writer redials its cached leader until its
		// metadata refreshes (default TTL 6s, longer than the phase).
		{"a/plain-with-flag", withFlag, 0, "yes", "any", true, true},
		// The same with a 300ms metadata TTL: both converge.
		{"a/plain-with-flag-ttl300ms", withFlag, 300 * time.Millisecond, "yes", "yes", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // the stories mostly wait for their phases to pass
			// Settle bounds the waits for the clients to move; a client
			// that is not expected to move uses it up, so it is short there.
			settle := 20 * time.Second
			if tc.fetchConverges != "yes" {
				settle = 3 * time.Second
			}
			c := embedded.StartT(t, embedded.Topic(storyTopic, 3))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			rep, err := azsim.Story{
				Backend:     c.Addrs()[0],
				Topic:       storyTopic,
				Drain:       20 * time.Second, // a bound: normally done in milliseconds
				Settle:      settle,
				NewProducer: plainWriter(tc.clientID, tc.metadataTTL),
				NewConsumer: plainReader(tc.clientID, "g-"+tc.name),
				Locate:      func(string) string { return "az-b" },
			}.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			deliverytest.CheckStory(t, tc.name, rep, deliverytest.StoryWant{
				FetchConverges: tc.fetchConverges, ProduceConverges: tc.produceConverges,
				MaySkipStored: tc.maySkip,
			})
			if (rep.LBCloses > 0) != tc.wantLBCloses {
				t.Errorf("load-balancing closes = %d, want any: %v", rep.LBCloses, tc.wantLBCloses)
			}
		})
	}
}
