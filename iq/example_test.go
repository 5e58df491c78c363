package iq_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/azkafka/azkafka/iq"
)

// Keys are routed as the Java application's key serde writes them.
func ExamplePartition() {
	for _, key := range []string{"KH01", "KH07", "KH32"} {
		fmt.Println(key, iq.Partition([]byte(key), 3), iq.Partition([]byte(key), 8)) // StringSerializer
	}
	fmt.Println(iq.Partition(binary.BigEndian.AppendUint32(nil, 42), 7)) // IntegerSerializer
	fmt.Println(iq.Partition(binary.BigEndian.AppendUint64(nil, 42), 7)) // LongSerializer
	// Output:
	// KH01 0 6
	// KH07 2 6
	// KH32 1 1
	// 5
	// 6
}

// Two instances; a is active for partition 0 of "orders" (3 partitions), b
// for 1 and 2, and each is the other's standby.
func exampleMetadata() iq.Metadata {
	return iq.Metadata{
		StoreSourceTopics: map[string][]string{"counts": {"orders"}},
		TopicPartitions:   map[string]int{"orders": 3},
		Instances: []iq.Instance{
			{HostInfo: iq.HostInfo{Host: "10.0.0.1", Port: 7070}, AZ: "us-east-1a",
				ActiveStores: []string{"counts"}, ActivePartitions: []iq.TopicPartition{{Topic: "orders", Partition: 0}},
				StandbyStores: []string{"counts"}, StandbyPartitions: []iq.TopicPartition{{Topic: "orders", Partition: 1}, {Topic: "orders", Partition: 2}},
				Lags: map[string]map[int]iq.Lag{"counts": {0: {}, 1: {Current: 90, End: 100, Lag: 10}, 2: {Current: 5, End: 50005, Lag: 50000}}}},
			{HostInfo: iq.HostInfo{Host: "10.0.0.2", Port: 7070}, AZ: "us-east-1b",
				ActiveStores: []string{"counts"}, ActivePartitions: []iq.TopicPartition{{Topic: "orders", Partition: 1}, {Topic: "orders", Partition: 2}},
				StandbyStores: []string{"counts"}, StandbyPartitions: []iq.TopicPartition{{Topic: "orders", Partition: 0}},
				Lags: map[string]map[int]iq.Lag{"counts": {0: {Current: 7, End: 7}, 1: {}, 2: {}}}},
		},
	}
}

// Fixed metadata, as a test of code that queries would give it.
func ExampleNewStaticSource() {
	src, err := iq.NewStaticSource(exampleMetadata())
	if err != nil {
		fmt.Println(err)
		return
	}
	client, _ := iq.NewClient(src)
	r, err := client.Route("counts", []byte("KH07"))
	fmt.Println(r.Partition, r.Active.HostInfo, r.Standbys[0].HostInfo, r.Standbys[0].Lag.Lag, err)
	// Output: 2 10.0.0.2:7070 10.0.0.1:7070 50000 <nil>
}

func ExampleNewClient() {
	src, _ := iq.NewStaticSource(exampleMetadata())
	client, err := iq.NewClient(src, iq.WithAllowStandby(true), iq.WithAZ("us-east-1a"))
	if err != nil {
		fmt.Println(err)
		return
	}
	err = client.Query(context.Background(), "counts", []byte("KH32"), func(ctx context.Context, r iq.Replica) error {
		if r.Active {
			return fmt.Errorf("%s is restarting: %w", r.HostInfo, iq.ErrNotActive) // as a host would answer
		}
		fmt.Println("served by standby", r.HostInfo, "lag", r.Lag.Lag)
		return nil
	})
	fmt.Println(err)
	// Output:
	// served by standby 10.0.0.1:7070 lag 10
	// <nil>
}

func ExampleNewHTTPSource() {
	// A Streams instance serving its metadata document (see the package doc).
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, port, _ := strings.Cut(srv.Listener.Addr().String(), ":")
		fmt.Fprintf(w, `{"version":1,"self":{"host":%q,"port":%s},"az":"us-east-1a","state":"RUNNING",
			"stores":{"counts":["orders"]},"topics":{"orders":1},
			"instances":[{"host":%q,"port":%s,"activeStores":["counts"],"activePartitions":{"orders":[0]}}],
			"lags":{"counts":{"0":{"current":42,"end":42,"lag":0}}}}`, host, port, host, port)
	}))
	defer srv.Close()

	src, err := iq.NewHTTPSource([]string{srv.URL + "/azkafka/iq/metadata"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close()
	if err := src.Refresh(context.Background()); err != nil { // or src.Start() to poll every 5s
		fmt.Println(err)
		return
	}
	md, _ := src.Metadata()
	in := md.Instances[0]
	fmt.Println(in.HostInfo.String() == srv.Listener.Addr().String(), in.AZ, in.Lags["counts"][0].Lag)
	// Output: true us-east-1a 0
}

// The routing of a Kafka Streams application read from its consumer group,
// with no code on the Java side. Stores whose source topics the group
// cannot tell are named with WithStoreTopics.
func ExampleNewClusterSource() {
	src, err := iq.NewClusterSource([]string{"kafka-0:9092"}, "orders-app",
		iq.WithStoreTopics("leftcount", "left"))
	if err != nil {
		fmt.Println(err)
		return
	}
	src.Start() // polls every 5s; the last good routing is kept when a poll fails
	defer src.Close()
	client, err := iq.NewClient(src)
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := client.Route("counts", []byte("alice"))
	fmt.Println(r.Partition, err)
}

// Routing from one source, lags from another: here two fixed sources stand
// for NewClusterSource (no lags) and NewHTTPSource (measured lags).
func ExampleNewCombinedSource() {
	routing := exampleMetadata()
	for i := range routing.Instances {
		routing.Instances[i].Lags, routing.Instances[i].AZ = nil, ""
	}
	fromGroup, _ := iq.NewStaticSource(routing)
	fromHTTP, _ := iq.NewStaticSource(exampleMetadata())
	src, err := iq.NewCombinedSource(fromGroup, fromHTTP)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close() // closes both
	client, _ := iq.NewClient(src)
	r, _ := client.Route("counts", []byte("KH07"))
	fmt.Println(r.Active.HostInfo, r.Standbys[0].HostInfo, r.Standbys[0].AZ, r.Standbys[0].Lag.Lag, r.Standbys[0].LagKnown)
	// Output: 10.0.0.2:7070 10.0.0.1:7070 us-east-1a 50000 true
}

// Settings from a map instead of the process environment; an option a
// constructor does not take, or a blank variable, is an error naming it.
func ExampleWithLookupEnv() {
	env := map[string]string{"AZKAFKA_IQ_ALLOW_STANDBY": "true", "AZKAFKA_IQ_MAX_LAG": "500"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	src, _ := iq.NewStaticSource(exampleMetadata())
	_, err := iq.NewClient(src, iq.WithLookupEnv(lookup), iq.WithAZ("us-east-1a"))
	fmt.Println(err)

	_, err = iq.NewClient(src, iq.WithLookupEnv(lookup), iq.WithStoreTopics("counts", "orders"))
	fmt.Println(err)

	env["AZKAFKA_IQ_MAX_LAG"] = " "
	_, err = iq.NewClient(src, iq.WithLookupEnv(lookup))
	fmt.Println(err)
	// Output:
	// <nil>
	// iq: NewClient: WithStoreTopics is an option of NewClusterSource only
	// iq: AZKAFKA_IQ_MAX_LAG is set but blank: unset it or give it a value
}
