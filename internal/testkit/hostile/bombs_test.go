package hostile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	testHost       = "127.0.0.1"
	testPort int32 = 9092
)

// bombVersions calls f with every key and version bomb c answers.
func bombVersions(c Case, f func(key, version int16)) {
	keys := []int16{ownKey[c]}
	if c == HeaderTagsBomb {
		keys = keys[:0]
		for k := range int16(200) {
			if kmsg.RequestForKey(k) != nil {
				keys = append(keys, k)
			}
		}
	}
	for _, k := range keys {
		for v := range kmsg.RequestForKey(k).MaxVersion() + 1 {
			f(k, v)
		}
	}
}

var bombs = []Case{HeaderTagsBomb, ApiVersionsBomb, MetadataBomb, InitProducerIDBomb, ProduceBomb, FetchBomb, DescribeGroupsBomb}

// TestBombsClaimMoreThanTheyHold decodes every bomb, at every version of
// its API, and expects kmsg (and, for the header, kproxy) to find that the
// bytes claim more than the frame holds.
func TestBombsClaimMoreThanTheyHold(t *testing.T) {
	for _, c := range bombs {
		n := 0
		bombVersions(c, func(key, version int16) {
			const corr = 0x01020304
			frame := bombResponse(c, key, version, corr, testHost, testPort)
			if frame == nil {
				if c != HeaderTagsBomb || headerFlexible(key, version) {
					t.Errorf("%s: no bomb for key %d v%d", c, key, version)
				}
				return
			}
			n++
			where := fmt.Sprintf("%s key %d v%d (%x)", c, key, version, frame)
			if size := binary.BigEndian.Uint32(frame); int(size) != len(frame)-4 || len(frame) > 100 {
				t.Errorf("%s: size prefix %d for %d bytes", where, size, len(frame))
			}
			if got := binary.BigEndian.Uint32(frame[4:]); got != corr {
				t.Errorf("%s: correlation ID %x", where, got)
			}
			req := kproxy.Request{Key: key, Version: version, CorrelationID: corr}
			if _, err := kproxy.DecodeResponse(req, frame[4:]); err == nil {
				t.Errorf("%s: decodes without error", where)
			}
			if c == HeaderTagsBomb {
				return
			}
			body := frame[8:]
			if headerFlexible(key, version) {
				if body[0] != 0 {
					t.Errorf("%s: header tags not empty", where)
				}
				body = body[1:]
			}
			resp := kmsg.ResponseForKey(key)
			resp.SetVersion(version)
			if err := resp.ReadFrom(body); err == nil {
				t.Errorf("%s: kmsg reads the body without error", where)
			}
		})
		if n == 0 {
			t.Errorf("%s: no version tested", c)
		}
	}
}

// truthful returns the honest response whose encoding the bomb c follows
// up to its lying field, and how many bytes at the end of the bomb lie.
func truthful(c Case, version int16) (kmsg.Response, int) {
	claim := 4 // an INT32 count or length
	if bodyFlexible(ownKey[c], version) {
		claim = 5 // uvarint of 2^31
	}
	switch c {
	case ApiVersionsBomb:
		return kmsg.NewPtrApiVersionsResponse(), claim
	case MetadataBomb:
		r := kmsg.NewPtrMetadataResponse()
		r.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 1, Host: testHost, Port: testPort, Rack: kmsg.StringPtr("az1")}}
		r.ClusterID, r.ControllerID = kmsg.StringPtr("hostile"), 1
		if bodyFlexible(keyMetadata, version) {
			return r, 3 // uvarint of 1,000,001
		}
		return r, 4
	case InitProducerIDBomb:
		r := kmsg.NewPtrInitProducerIDResponse()
		r.ProducerID = 1000
		if !bodyFlexible(keyInitProducerID, version) {
			return r, 0 // cut, not lying: compared as a prefix
		}
		return r, 1 + 1 + 5 // tag count, tag, uvarint size; kmsg writes one 00 instead
	case ProduceBomb:
		return kmsg.NewPtrProduceResponse(), claim
	case FetchBomb:
		return kmsg.NewPtrFetchResponse(), claim
	case DescribeGroupsBomb:
		r := kmsg.NewPtrDescribeGroupsResponse()
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group, g.State, g.ProtocolType, g.Protocol = "g", "Stable", "consumer", "range"
		g.Members = []kmsg.DescribeGroupsResponseGroupMember{{MemberID: "member-1", ClientID: "hostile", ClientHost: "/" + testHost}}
		r.Groups = []kmsg.DescribeGroupsResponseGroup{g}
		return r, claim
	}
	panic(c)
}

// TestBombLayoutsFollowKmsg checks each API bomb's field order against
// kmsg's own encoder: up to the lying field, the bomb's bytes are those of
// the honest response kmsg encodes.
func TestBombLayoutsFollowKmsg(t *testing.T) {
	for _, c := range bombs[1:] {
		bombVersions(c, func(key, version int16) {
			frame := bombResponse(c, key, version, 1, testHost, testPort)
			honest, claim := truthful(c, version)
			want := kproxy.EncodeResponse(kproxy.Request{Key: key, Version: version, CorrelationID: 1}, honest)
			got := frame[4:]
			if n := len(got) - claim; n > len(want) || !bytes.Equal(got[:n], want[:n]) {
				t.Errorf("%s v%d:\n bomb   %x\n honest %x", c, version, got, want)
			}
		})
	}
}

func TestRandomBodyIsStable(t *testing.T) {
	a, b := randomBody(5), randomBody(5)
	if !bytes.Equal(a, b) || len(a) != 4+4+randomBodyLen || bytes.Count(a[8:], []byte{0}) > 64 {
		t.Errorf("random body: %d bytes, stable %v", len(a), bytes.Equal(a, b))
	}
}

func TestHTTPBodyMatchesContentLength(t *testing.T) {
	_, body, ok := bytes.Cut(httpBadRequest, []byte("\r\n\r\n"))
	if !ok || len(body) != 157 {
		t.Errorf("HTTP body of %d bytes, Content-Length says 157", len(body))
	}
}
