package kproxy

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// headerSeeds returns request frames (without size prefix) built by kmsg:
// flexible and non-flexible headers, null and non-null client IDs.
func headerSeeds() [][]byte {
	var seeds [][]byte
	for _, k := range []int16{0, 1, 3, 7, 10, 18, 19, 32} {
		req := kmsg.RequestForKey(k)
		for _, v := range []int16{0, 3, req.MaxVersion()} {
			if v > req.MaxVersion() {
				continue
			}
			req.SetVersion(v)
			for _, id := range []string{"", "warpstream_az=az-a,ws_az=b"} {
				f := kmsg.NewRequestFormatter()
				if id != "" {
					f = kmsg.NewRequestFormatter(kmsg.FormatterClientID(id))
				}
				seeds = append(seeds, f.AppendRequest(nil, req, 7)[4:])
			}
		}
	}
	return seeds
}

// FuzzParseRequestHeader checks that the parser never panics, never
// reports a body offset outside the frame, and agrees with kmsg's encoder
// on the frames kmsg builds.
func FuzzParseRequestHeader(f *testing.F) {
	for _, s := range headerSeeds() {
		f.Add(s)
	}
	f.Add([]byte{0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 0x05, 0x01, 0x80})
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, err := ParseRequestHeader(frame)
		if err != nil {
			return
		}
		if h.BodyOffset < 8 || h.BodyOffset > len(frame) {
			t.Fatalf("body offset %d outside frame of %d bytes", h.BodyOffset, len(frame))
		}
		// Re-encoding the header with kmsg must reproduce the parsed
		// prefix when the header had no tags and a non-null client ID.
		req := kmsg.RequestForKey(h.Key)
		if req == nil || h.ClientID == "" || (h.Key == 7 && h.Version == 0) || h.Version < 0 || h.Version > req.MaxVersion() {
			return
		}
		req.SetVersion(h.Version)
		want := kmsg.NewRequestFormatter(kmsg.FormatterClientID(h.ClientID)).AppendRequest(nil, req, h.CorrelationID)[4:]
		wantHeaderLen := 8 + 2 + len(h.ClientID)
		if req.IsFlexible() {
			wantHeaderLen++
		}
		if h.BodyOffset == wantHeaderLen && !bytes.Equal(frame[:h.BodyOffset], want[:wantHeaderLen]) {
			t.Fatalf("parsed %+v from % x, kmsg encodes that header as % x", h, frame[:h.BodyOffset], want[:wantHeaderLen])
		}
	})
}

// FuzzProduceAcks checks the acks reader against kmsg's encoder and that it
// never panics on garbage.
func FuzzProduceAcks(f *testing.F) {
	for _, v := range []int16{0, 2, 3, 8, 9, 11} {
		f.Add(v, int16(-1), "")
		f.Add(v, int16(0), "txn")
	}
	f.Fuzz(func(t *testing.T, version, acks int16, txn string) {
		if version < 0 || version > 13 {
			// Exercise the parser on arbitrary bytes too.
			_, _ = produceAcks(version, []byte(txn))
			return
		}
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(version)
		req.Acks = acks
		if txn != "" {
			req.TransactionID = &txn
		}
		body := req.AppendTo(nil)
		got, err := produceAcks(version, body)
		if err != nil {
			t.Fatalf("v%d acks %d txn %q: %v", version, acks, txn, err)
		}
		if got != acks {
			t.Fatalf("v%d txn %q: acks %d, want %d", version, txn, got, acks)
		}
		for i := range body {
			_, _ = produceAcks(version, body[:i])
		}
	})
}
