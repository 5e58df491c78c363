package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
)

// TestQuickstartSimulated runs the quickstart's default path (story a on
// the embedded cluster) and checks the report it prints.
func TestQuickstartSimulated(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out, func(string) string { return "" }); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`AZ assumed: +az-b \(source: option`),
		regexp.MustCompile(`client ID: +warpstream_session_id=[0-9a-f-]{36},warpstream_az=az-b,warpstream_interzone_lb=true\n`),
		regexp.MustCompile(`before the az-b agent \([0-9.]+s\): produce [1-9]\d*, fetch [1-9]\d*\n`),
		regexp.MustCompile(`in the last 1s: produce 0, fetch 0\n`),
		regexp.MustCompile(`switch: +converged to az-b in `),
		regexp.MustCompile(`messages: +produced ([1-9]\d*), consumed ([1-9]\d*), lost 0, duplicated 0, failed writes 0 \(re-delivered to the group after a rebalance: \d+\)\n`),
		regexp.MustCompile(`writer: +idempotent true \(producer ID \d+\)`),
		regexp.MustCompile(`writer: +idempotent true \(producer ID \d+\)`),
	} {
		if !want.Match(out.Bytes()) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestQuickstartKafkaBrokers runs the KAFKA_BROKERS path against an
// embedded broker, with the AZ given through the environment.
func TestQuickstartKafkaBrokers(t *testing.T) {
	c := embedded.StartT(t)
	env := map[string]string{"KAFKA_BROKERS": strings.Join(c.Addrs(), ","), "AZKAFKA_AZ": "use1-az1"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out, func(k string) string { return env[k] }); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
	for _, want := range []string{
		"AZ assumed:      use1-az1 (source: env)",
		",warpstream_az=use1-az1,warpstream_interzone_lb=true\n",
		"messages:        produced 100, consumed 100, lost 0, duplicated 0\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
