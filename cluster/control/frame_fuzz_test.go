package control

import (
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/runtime"
)

// chunkStream hands out gRPC messages as a session's stream does.
type chunkStream struct{ msgs [][]byte }

func (s *chunkStream) RecvMsg(m any) error {
	if len(s.msgs) == 0 {
		return io.EOF
	}
	*m.(*rawMsg) = s.msgs[0]
	s.msgs = s.msgs[1:]
	return nil
}

// messages splits fuzz input into gRPC messages: each is a 2-byte
// big-endian length (at most maxChunk+1, as gRPC enforces) and its bytes.
func messages(b []byte) [][]byte {
	var out [][]byte
	for len(b) >= 2 {
		n := min(int(binary.BigEndian.Uint16(b)), maxChunk+1, len(b)-2)
		out = append(out, b[2:2+n])
		b = b[2+n:]
	}
	return out
}

func asMessages(chunks []encoded) []byte {
	var b []byte
	for _, c := range chunks {
		b = binary.BigEndian.AppendUint16(b, uint16(len(c)))
		b = append(b, c...)
	}
	return b
}

// FuzzReadFrame: the control plane's frame reader never panics and never
// gathers more than its limit (a registration's 4 KiB before a session
// is registered); what it refuses is a malformed or oversized frame or
// the stream's end; a frame it accepts encodes back to one that reads the
// same.
func FuzzReadFrame(f *testing.F) {
	for _, fr := range []*frame{
		{Register: &register{Protocol: protocolVersion, WorkerID: "w1", Slots: 2, DataAddr: "10.0.0.1:6121", Fingerprint: "abc", Instance: "i"}},
		{Epoch: 3, JobID: "j", Attempt: 2, Heartbeat: true},
		{Epoch: 3, JobID: "j", Attempt: 1, Ack: &runtime.AcknowledgeCheckpoint{From: runtime.TaskRef{JobID: "j", Attempt: 1, Task: 4}, CheckpointID: 9}},
		{RegisterReply: &registerReply{Code: refusedIdentity, Reason: "bound"}},
	} {
		b, err := encode(fr)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(asMessages(chunks(b)))
	}
	big, _ := encode(&frame{Register: &register{WorkerID: string(make([]byte, 3*maxChunk))}})
	f.Add(asMessages(chunks(big)))
	f.Add([]byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, limit := range []int{maxRegisterFrame, maxFrame} {
			fr, err := readFrame(&chunkStream{msgs: messages(data)}, limit)
			if err != nil {
				if !errors.Is(err, errMalformed) && !errors.Is(err, errFrameTooLarge) && !errors.Is(err, io.EOF) {
					t.Fatalf("error %v is none of the reader's", err)
				}
				continue
			}
			b, err := encode(fr)
			if err != nil {
				t.Fatal(err)
			}
			again, err := readFrame(&chunkStream{msgs: messages(asMessages(chunks(b)))}, maxFrame)
			if err != nil || !reflect.DeepEqual(again, fr) {
				t.Fatalf("round trip: %+v, %v; want %+v", again, err, fr)
			}
		}
	})
}
