package main

// embedded.go lets the program run with no broker: when KAFKA_BROKERS is
// unset it starts an in-process broker, points KAFKA_BROKERS at it, sets
// embeddedVar (the Processor part is then left out) and gives the zone in
// AZKAFKA_AZ (az-a) unless it is set, so that nothing asks a cloud's
// metadata service. With KAFKA_BROKERS set it does nothing.

import (
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
)

// embeddedVar is set when the program runs on the embedded broker.
const embeddedVar = "EXACTLYONCE_EMBEDDED"

func init() {
	if os.Getenv("KAFKA_BROKERS") != "" {
		return
	}
	c, err := embedded.Start()
	if err != nil {
		log.Fatalf("starting the embedded broker: %v", err)
	}
	os.Setenv("KAFKA_BROKERS", strings.Join(c.Addrs(), ","))
	os.Setenv(embeddedVar, "1")
	if os.Getenv("AZKAFKA_AZ") == "" {
		os.Setenv("AZKAFKA_AZ", "az-a")
	}
	fmt.Fprintf(os.Stderr, "embedded broker on %s (KAFKA_BROKERS unset); AZ %s\n", os.Getenv("KAFKA_BROKERS"), os.Getenv("AZKAFKA_AZ"))
}
