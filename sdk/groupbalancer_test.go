package sdk

import (
	"bytes"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMemberMetadata: the member metadata the Reader sends is kafka-go's
// layout (version 1, topics, user data, nothing after), and the decoder
// reads it back, and reads the versions Java and franz-go send.
func TestMemberMetadata(t *testing.T) {
	b := encodeMemberMetadata([]string{"a", "events"}, []byte{1, 2})
	want := []byte{0, 1, 0, 0, 0, 2, 0, 1, 'a', 0, 6, 'e', 'v', 'e', 'n', 't', 's', 0, 0, 0, 2, 1, 2}
	if !bytes.Equal(b, want) {
		t.Fatalf("encoded % x, want % x", b, want)
	}
	if nul := encodeMemberMetadata(nil, nil); !bytes.Equal(nul, []byte{0, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}) {
		t.Fatalf("no topics, no user data: % x", nul)
	}
	for v := int16(0); v <= 3; v++ {
		m := kmsg.NewConsumerMemberMetadata()
		m.Version = v
		m.Topics = []string{"t1", "t2"}
		m.UserData = []byte("zone")
		topics, ud, err := decodeMemberMetadata(m.AppendTo(nil))
		if err != nil || !slices.Equal(topics, m.Topics) || string(ud) != "zone" {
			t.Errorf("v%d: %v %q, %v", v, topics, ud, err)
		}
	}
	for _, bad := range [][]byte{
		nil,
		{0, 1, 0, 0},
		{0xff, 0xff, 0, 0, 0, 0},                // negative version
		{0, 1, 0x7f, 0xff, 0xff, 0xff},          // 2^31-1 topics in no bytes
		{0, 1, 0, 0, 0, 1, 0x7f, 0xff},          // a topic name longer than what is left
		{0, 1, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0}, // user data longer than what is left
	} {
		if _, _, err := decodeMemberMetadata(bad); err == nil {
			t.Errorf("% x decoded without an error", bad)
		}
	}
}

// FuzzDecodeMemberMetadata: member metadata comes from the other members
// through the broker; no bytes make the decoder panic or allocate more
// than a small multiple of their length, and what it encodes it reads back.
func FuzzDecodeMemberMetadata(f *testing.F) {
	f.Add(encodeMemberMetadata([]string{"a", "events"}, []byte{1, 2}))
	f.Add(encodeMemberMetadata(nil, nil))
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 3
	m.Topics = []string{"t"}
	f.Add(m.AppendTo(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		topics, ud, err := decodeMemberMetadata(b)
		if err != nil {
			return
		}
		if len(ud) > len(b) || cap(topics) > len(b) {
			t.Fatalf("%d bytes decoded into %d topics' room and %d bytes of user data", len(b), cap(topics), len(ud))
		}
		again, ud2, err := decodeMemberMetadata(encodeMemberMetadata(topics, ud))
		if err != nil || !slices.Equal(again, topics) || !bytes.Equal(ud2, ud) {
			t.Fatalf("round trip of %q %q: %q %q %v", topics, ud, again, ud2, err)
		}
	})
}
