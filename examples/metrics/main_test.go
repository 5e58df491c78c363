package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestRun starts the example, waits for the URL it prints, scrapes it and
// stops it.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- run(ctx, pw, "127.0.0.1:0", 10*time.Millisecond); pw.Close() }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no URL printed: %v (run: %v)", err, <-done)
	}
	go io.Copy(io.Discard, pr)
	url := regexp.MustCompile(`http://\S+/metrics`).FindString(line)
	if url == "" {
		t.Fatalf("no URL in %q", line)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`azkafka_client_info\{az="az-a",az_source="option",client_id="metrics-example",kind="writer",session_id="[0-9a-f-]{36}"\} 1`),
		regexp.MustCompile(`azkafka_client_info\{az="az-a",az_source="option",client_id="metrics-example",kind="reader",session_id="[0-9a-f-]{36}"\} 1`),
		regexp.MustCompile(`azkafka_reader_messages_total\{az="az-a",client_id="metrics-example"\} (\d{3,})`),
		regexp.MustCompile(`azkafka_broker_sent_bytes_total\{az="az-a",broker="[^"]+",client_id="metrics-example",in_zone="false",rack="krack"\} [1-9]`),
		regexp.MustCompile(`go_goroutines \d+`),
	} {
		if !want.Match(body) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", strings.Join(regexp.MustCompile(`(?m)^azkafka_.*$`).FindAllString(string(body), -1), "\n"))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}
