package iq_test

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/azkafka/azkafka/iq"
)

// Query a key of a Kafka Streams store from Go: the routing comes from the
// application's group on the cluster, and standbys within the allowed lag
// answer when the active copy does not. (Compiled, not run: it needs a
// cluster and the application's instances.)
func ExampleClient_Query() {
	if err := queryAlice(context.Background()); err != nil {
		fmt.Println(err)
	}
}

func queryAlice(ctx context.Context) error {
	src, err := iq.NewClusterSource([]string{"kafka-0:9092"}, "orders-app") // brokers, application.id
	if err != nil {
		return err
	}
	src.Start() // polls the group every 5 s; the last good routing is kept when a poll fails
	defer src.Close()
	client, err := iq.NewClient(src, iq.WithAllowStandby(true))
	if err != nil {
		return err
	}
	return client.Query(ctx, "counts", []byte("alice"), func(ctx context.Context, r iq.Replica) error {
		// r.HostInfo is the instance's application.server: ask it with your own endpoint.
		return get(ctx, "http://"+r.HostInfo.String()+"/counts/alice")
	})
}

// get asks one instance; a status that is not 200 becomes an
// *iq.StatusError, which Query retries on the next replica when it is
// 5xx, 429 or 421.
func get(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return &iq.StatusError{Code: resp.StatusCode, Body: string(body)}
	}
	fmt.Printf("%s\n", body)
	return nil
}
