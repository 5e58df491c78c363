package main

// embedded.go lets the program of main.go, the one the README shows, run
// with no broker: when KAFKA_BROKERS is unset it starts an in-process
// broker with the topic "events" and points KAFKA_BROKERS at it, and gives
// the zone in AZKAFKA_AZ (az-a) unless it is set, so that nothing asks a
// cloud's metadata service. With KAFKA_BROKERS set it does nothing.
//
//	go run ./examples/getstarted                              # embedded broker
//	KAFKA_BROKERS=localhost:9092 go run ./examples/getstarted # your broker

import (
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
)

func init() {
	if os.Getenv("KAFKA_BROKERS") != "" {
		return
	}
	c, err := embedded.Start(embedded.Topic("events", 3))
	if err != nil {
		log.Fatalf("starting the embedded broker: %v", err)
	}
	// The broker lives as long as the process.
	os.Setenv("KAFKA_BROKERS", strings.Join(c.Addrs(), ","))
	if os.Getenv("AZKAFKA_AZ") == "" {
		os.Setenv("AZKAFKA_AZ", "az-a")
	}
	fmt.Fprintf(os.Stderr, "embedded broker on %s (KAFKA_BROKERS unset); AZ %s\n",
		os.Getenv("KAFKA_BROKERS"), os.Getenv("AZKAFKA_AZ"))
}
