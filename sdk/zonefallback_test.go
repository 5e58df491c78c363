package sdk

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchFrame encodes a Fetch request of version v, with rack, as kgo
// writes it: one whole frame.
func fetchFrame(v int16, rack string) []byte {
	req := kmsg.NewPtrFetchRequest()
	req.Version = v
	req.ReplicaID = -1
	req.MaxWaitMillis = 500
	req.MinBytes = 1
	req.MaxBytes = 50 << 20
	req.SessionID = 7
	req.SessionEpoch = 3
	req.Rack = rack
	t := kmsg.NewFetchRequestTopic()
	t.Topic = "events"
	t.TopicID = [16]byte{1, 2, 3}
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition = 4
	p.FetchOffset = 1234
	p.PartitionMaxBytes = 1 << 20
	p.CurrentLeaderEpoch = 9
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("warpstream_az=az-b")).AppendRequest(nil, req, 42)
}

// parseFetchFrame decodes a frame written by fetchFrame.
func parseFetchFrame(t *testing.T, b []byte) *kmsg.FetchRequest {
	t.Helper()
	if int(binary.BigEndian.Uint32(b)) != len(b)-4 {
		t.Fatalf("frame size %d, frame of %d bytes", binary.BigEndian.Uint32(b), len(b))
	}
	v := int16(binary.BigEndian.Uint16(b[6:]))
	off := 12 + 2 + int(binary.BigEndian.Uint16(b[12:]))
	if v >= 12 {
		off++ // no tagged fields in the header
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version = v
	if err := req.ReadFrom(b[off:]); err != nil {
		t.Fatalf("v%d: decoding the rewritten request: %v", v, err)
	}
	return req
}

// TestStripFetchRack: every Fetch version with a rack ID is rewritten
// with an empty one and nothing else changed; other frames are refused.
func TestStripFetchRack(t *testing.T) {
	for v := int16(11); v <= (*kmsg.FetchRequest)(nil).MaxVersion(); v++ {
		in := fetchFrame(v, "az-b")
		if !isFetchFrame(in) {
			t.Fatalf("v%d: not recognised as a Fetch frame", v)
		}
		out, ok := stripFetchRack(in)
		if !ok {
			t.Fatalf("v%d: not rewritten", v)
		}
		if !bytes.Equal(out[4:14], in[4:14]) {
			t.Errorf("v%d: header changed: %x, was %x", v, out[4:14], in[4:14])
		}
		got := parseFetchFrame(t, out)
		want := parseFetchFrame(t, in)
		if got.Rack != "" {
			t.Errorf("v%d: rack %q after the rewrite", v, got.Rack)
		}
		want.Rack = ""
		if !bytes.Equal(got.AppendTo(nil), want.AppendTo(nil)) {
			t.Errorf("v%d: the rewrite changed more than the rack", v)
		}
		if _, ok := stripFetchRack(fetchFrame(v, "")); ok {
			t.Errorf("v%d: a request without a rack was rewritten", v)
		}
	}
	if isFetchFrame(fetchFrame(10, "")) {
		t.Error("Fetch v10 (no rack field) taken for a rewritable frame")
	}
	in := fetchFrame(13, "az-b")
	if isFetchFrame(in[:len(in)-1]) {
		t.Error("a partial frame taken for a whole one")
	}
}

// FuzzStripFetchRack: no input makes the rewrite panic, and whatever it
// rewrites is a frame of its own length.
func FuzzStripFetchRack(f *testing.F) {
	for v := int16(11); v <= 18; v++ {
		f.Add(fetchFrame(v, "az-b"))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !isFetchFrame(b) {
			return
		}
		if out, ok := stripFetchRack(b); ok && int(binary.BigEndian.Uint32(out)) != len(out)-4 {
			t.Fatalf("rewritten frame claims %d bytes, has %d", binary.BigEndian.Uint32(out), len(out)-4)
		}
	})
}

// recordingConn keeps what is written to it.
type recordingConn struct {
	net.Conn
	wrote [][]byte
}

func (c *recordingConn) Write(b []byte) (int, error) {
	c.wrote = append(c.wrote, bytes.Clone(b))
	return len(b), nil
}

// TestZoneFallback: a failed dial or request to a broker of the own zone
// makes fetches leave out the rack until that broker answers again, or the
// hold ends; brokers of other zones do not count.
func TestZoneFallback(t *testing.T) {
	now := time.Unix(1000, 0)
	z := newZoneFallback("az-b", slog.New(slog.DiscardHandler))
	z.now = func() time.Time { return now }
	rackB, rackA := "az-b", "az-a"
	inZone := kgo.BrokerMetadata{NodeID: 2, Rack: &rackB}
	other := kgo.BrokerMetadata{NodeID: 1, Rack: &rackA}
	conn := &recordingConn{}
	c := &rackConn{Conn: conn, z: z}
	write := func() string {
		t.Helper()
		if n, err := c.Write(fetchFrame(13, "az-b")); err != nil || n != len(fetchFrame(13, "az-b")) {
			t.Fatalf("Write = %d, %v", n, err)
		}
		return parseFetchFrame(t, conn.wrote[len(conn.wrote)-1]).Rack
	}

	if got := write(); got != "az-b" {
		t.Fatalf("healthy zone: rack %q, want az-b", got)
	}
	z.failed(other)
	if got := write(); got != "az-b" {
		t.Fatalf("a broker of another zone failed: rack %q, want az-b", got)
	}
	z.failed(inZone)
	if got := write(); got != "" {
		t.Fatalf("the zone's broker failed: rack %q, want none", got)
	}
	now = now.Add(ZoneFallbackHold - time.Second)
	if got := write(); got != "" {
		t.Fatalf("within the hold: rack %q, want none", got)
	}
	z.served(inZone)
	if got := write(); got != "az-b" {
		t.Fatalf("the zone's broker answered again: rack %q, want az-b", got)
	}
	z.failed(inZone)
	now = now.Add(ZoneFallbackHold)
	if got := write(); got != "az-b" {
		t.Fatalf("after the hold: rack %q, want az-b", got)
	}
	if _, err := c.Write([]byte("not a frame")); err != nil || string(conn.wrote[len(conn.wrote)-1]) != "not a frame" {
		t.Fatalf("other bytes were not passed through: %v", err)
	}
}
