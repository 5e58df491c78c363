package kframe_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/kframe"
)

// answer serves one request on conn: it reads a frame and writes resp, a
// response frame after its size prefix; it returns the request frame.
func answer(t *testing.T, conn net.Conn, resp []byte) []byte {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Error(err)
		return nil
	}
	req := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, req); err != nil {
		t.Error(err)
		return nil
	}
	if resp != nil {
		_, _ = conn.Write(binary.BigEndian.AppendUint32(nil, uint32(len(resp))))
		_, _ = conn.Write(resp)
	}
	return req
}

func TestRequestOverAConnection(t *testing.T) {
	g := kmsg.NewStreamsGroupDescribeResponseGroup()
	g.Group, g.State = "app", "Stable"
	for i := range 3 {
		m := kmsg.NewStreamsGroupDescribeResponseGroupMember()
		m.MemberID = fmt.Sprint("member-", i)
		g.Members = append(g.Members, m)
	}
	resp := kmsg.NewStreamsGroupDescribeResponse()
	resp.Groups = []kmsg.StreamsGroupDescribeResponseGroup{g}
	body := resp.AppendTo(nil)
	frame := func(corr uint32, header []byte, body []byte) []byte {
		return append(append(binary.BigEndian.AppendUint32(nil, corr), header...), body...)
	}
	for _, c := range []struct {
		name string
		resp []byte
		want string
	}{
		{"ok", frame(7, []byte{0}, body), ""},
		{"header tag skipped", frame(7, []byte{1, 5, 2, 0xaa, 0xbb}, body), ""},
		{"wrong correlation ID", frame(8, []byte{0}, body), "response correlation ID 8, want 7"},
		{"bad header tags", frame(7, []byte{1, 5, 9}, nil), "response header: malformed kafka frame"},
		{"truncated body", frame(7, []byte{0}, body[:len(body)/2]), "decoding the StreamsGroupDescribe response"},
		{"too short", []byte{0, 0}, "response size 2 out of range 4..67108864"},
		{"closed", nil, "EOF"},
	} {
		t.Run(c.name, func(t *testing.T) {
			client, server := net.Pipe()
			defer client.Close()
			var reqFrame []byte
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer server.Close()
				reqFrame = answer(t, server, c.resp)
			}()
			req := kmsg.NewPtrStreamsGroupDescribeRequest()
			req.Groups = []string{"app"}
			resp, err := kframe.Request(client, "cid", 7, req)
			client.Close()
			<-done
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("got %v, want %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g := resp.(*kmsg.StreamsGroupDescribeResponse).Groups; len(g) != 1 || g[0].Group != "app" || len(g[0].Members) != 3 {
				t.Fatalf("decoded %+v", g)
			}
			// What was sent is a StreamsGroupDescribe v0 for the group,
			// with the client ID, as kmsg reads it.
			if k, v, corr := binary.BigEndian.Uint16(reqFrame), binary.BigEndian.Uint16(reqFrame[2:]), binary.BigEndian.Uint32(reqFrame[4:]); k != 89 || v != 0 || corr != 7 {
				t.Fatalf("header %d v%d correlation %d", k, v, corr)
			}
			if n := binary.BigEndian.Uint16(reqFrame[8:]); string(reqFrame[10:10+n]) != "cid" {
				t.Fatalf("client ID %q", reqFrame[10:10+n])
			}
			got := kmsg.NewPtrStreamsGroupDescribeRequest()
			if err := got.ReadFrom(reqFrame[10+3+1:]); err != nil || !slices.Equal(got.Groups, []string{"app"}) || got.IncludeAuthorizedOperations {
				t.Fatalf("request %+v, %v", got, err)
			}
		})
	}
}
