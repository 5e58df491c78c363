package frameguard

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkFetchThroughput reads Fetch responses (v12, one partition
// carrying a record set of the given size) over loopback TCP the way each
// client does (size prefix, then the body: kafka-go through a
// bufio.Reader, kgo from the connection itself), with and without the
// guard.
//
//	go test -run '^$' -bench FetchThroughput -benchmem -count 6 ./internal/frameguard | benchstat -col /guard -
func BenchmarkFetchThroughput(b *testing.B) {
	for _, size := range []struct {
		name  string
		bytes int
	}{{"records=16KiB", 16 << 10}, {"records=1MiB", 1 << 20}} {
		resp := fetchResponse(size.bytes)
		req := request(kmsg.NewPtrFetchRequest(), 12, 1)
		for _, client := range []string{"kafka-go", "kgo"} {
			for _, guard := range []string{"off", "on"} {
				b.Run(size.name+"/client="+client+"/guard="+guard, func(b *testing.B) {
					fetchThroughput(b, resp, req, client == "kgo", guard == "on")
				})
			}
		}
	}
}

func fetchThroughput(b *testing.B, resp, req []byte, direct, guard bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go serveFetches(ln, resp)
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	c := raw
	if guard {
		c = Wrap(raw, testAddr, 0, nil)
	}
	var r io.Reader = bufio.NewReader(c) // kafka-go's way
	if direct {
		r = c // kgo's
	}
	body := make([]byte, len(resp)-4)
	var sz [4]byte
	b.SetBytes(int64(len(resp)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		binary.BigEndian.PutUint32(req[8:], uint32(i)) // correlation ID
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(r, sz[:]); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(r, body); err != nil {
			b.Fatal(err)
		}
	}
}

// fetchResponse is a Fetch v12 response frame (correlation ID 0, patched
// per request by serveFetches) with one partition of n record bytes.
func fetchResponse(n int) []byte {
	r := kmsg.NewPtrFetchResponse()
	t := kmsg.NewFetchResponseTopic()
	t.Topic = "t"
	p := kmsg.NewFetchResponseTopicPartition()
	p.HighWatermark, p.LastStableOffset = 1000, 1000
	p.RecordBatches = make([]byte, n)
	t.Partitions = append(t.Partitions, p)
	r.Topics = append(r.Topics, t)
	return response(r, 12, 0)
}

// serveFetches answers each request frame on each connection with resp,
// its correlation ID set to the request's.
func serveFetches(ln net.Listener, resp []byte) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			out := append([]byte(nil), resp...)
			br := bufio.NewReader(c)
			var sz [4]byte
			for {
				if _, err := io.ReadFull(br, sz[:]); err != nil {
					return
				}
				frame := make([]byte, binary.BigEndian.Uint32(sz[:]))
				if _, err := io.ReadFull(br, frame); err != nil {
					return
				}
				copy(out[4:8], frame[4:8])
				if _, err := c.Write(out); err != nil {
					return
				}
			}
		}()
	}
}
