package azsim_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/azsim"
	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/sdk"
	"github.com/segmentio/kafka-go"
)

// sdkOptions pins the AZ (no detection, no network) and ignores the
// process environment so that the test does not depend on AZKAFKA_*.
func sdkOptions() []sdk.Option {
	return []sdk.Option{
		sdk.WithAZ("az-b"),
		sdk.WithGetenv(func(string) string { return "" }),
		sdk.WithLogger(slog.New(slog.DiscardHandler)),
	}
}

func sdkWriter(metadataTTL time.Duration) func([]string) (azsim.Producer, error) {
	return func(bootstrap []string) (azsim.Producer, error) {
		w := &kafka.Writer{Addr: kafka.TCP(bootstrap...), Topic: storyTopic, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
		if metadataTTL > 0 {
			w.Transport = &kafka.Transport{MetadataTTL: metadataTTL}
		}
		return sdk.NewWriter(w, sdkOptions()...)
	}
}

func sdkReader(group string) func([]string) (azsim.Consumer, error) {
	return func(bootstrap []string) (azsim.Consumer, error) {
		return sdk.NewReader(kafka.ReaderConfig{
			Brokers: bootstrap, Topic: storyTopic, GroupID: group,
			StartOffset:       kafka.FirstOffset,
			MaxWait:           100 * time.Millisecond,
			HeartbeatInterval: 100 * time.Millisecond,
			SessionTimeout:    time.Second,
			RebalanceTimeout:  time.Second,
			JoinGroupBackoff:  100 * time.Millisecond,
			ReadBackoffMin:    10 * time.Millisecond,
			ReadBackoffMax:    100 * time.Millisecond,
		}, sdkOptions()...)
	}
}

// TestStorySDK runs stories a and b with the sdk's Writer and Reader.
func TestStorySDK(t *testing.T) {
	cases := []struct {
		name        string
		removeLocal bool
		metadataTTL time.Duration
		// The default-TTL case shows that the Writer does not wait for
		// kafka-go's metadata refresh (uniform in [0, MetadataTTL),
		// default 6s): a transient failure makes it rediscover at once.
	}{
		{"a/default-metadata-ttl", false, 0},
		{"a/metadata-ttl-300ms", false, 300 * time.Millisecond},
		{"b/remove-local", true, 300 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // the stories mostly wait for their phases to pass
			c := embedded.StartT(t, embedded.Topic(storyTopic, 3))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			rep, err := azsim.Story{
				Backend:     c.Addrs()[0],
				Topic:       storyTopic,
				Drain:       20 * time.Second, // a bound: normally done in milliseconds
				RemoveLocal: tc.removeLocal,
				NewProducer: sdkWriter(tc.metadataTTL),
				NewConsumer: sdkReader("g-" + tc.name),
			}.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			deliverytest.CheckStory(t, tc.name, rep, deliverytest.StoryWant{
				FetchConverges: "yes", ProduceConverges: "yes",
				RemoveLocal: tc.removeLocal, NoFailedWrites: true, NoDuplicates: true, // the Writer is idempotent (acks=all)
			})
		})
	}
}
