package control

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// A session travels on a TCP connection of its own, authenticated by
// peerauth before its first byte (when the deployment authenticates), as
// a sequence of messages: each a 4-byte big-endian length and that many
// bytes, one chunk of a frame (wire.go). The connection carries nothing
// else; a session ends with its connection and a connection with its
// session.

// http2Preface begins what a gRPC client sends: the control plane of
// Sluice versions before this one (protocol 2).
const http2Preface = "PRI "

// errMessageTooLarge is a message longer than the receiver reads: the
// connection ends before its bytes are read.
var errMessageTooLarge = errors.New("control: a message past the size limit")

// connStream is one end of a session's connection.
type connStream struct {
	conn net.Conn
	r    *bufio.Reader
	// limit is the longest message read.
	limit int
	// writeTimeout bounds one message's write: a peer that stopped
	// reading ends the session rather than block its sender for good.
	writeTimeout time.Duration
	// ctx is done once the connection is closed.
	ctx   context.Context
	close context.CancelFunc
	wmu   sync.Mutex
}

func newConnStream(conn net.Conn, limit int, writeTimeout time.Duration) *connStream {
	ctx, cancel := context.WithCancel(context.Background())
	s := &connStream{conn: conn, r: bufio.NewReaderSize(conn, 4<<10), limit: limit, writeTimeout: writeTimeout, ctx: ctx}
	s.close = func() {
		cancel()
		_ = conn.Close()
	}
	return s
}

// SendMsg writes one message: m is an encoded chunk.
func (s *connStream) SendMsg(m any) error {
	b, ok := m.(encoded)
	if !ok {
		return fmt.Errorf("control: cannot send a %T", m)
	}
	msg := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(msg, uint32(len(b)))
	copy(msg[4:], b)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.writeTimeout > 0 {
		_ = s.conn.SetWriteDeadline(time.Now().Add(s.writeTimeout))
	}
	_, err := s.conn.Write(msg)
	return err
}

// RecvMsg reads one message into m, a *rawMsg; a message longer than the
// limit ends the connection unread.
func (s *connStream) RecvMsg(m any) error {
	raw, ok := m.(*rawMsg)
	if !ok {
		return fmt.Errorf("control: cannot receive into a %T", m)
	}
	var head [4]byte
	if _, err := io.ReadFull(s.r, head[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(head[:])
	if string(head[:]) == http2Preface {
		s.close()
		return fmt.Errorf("%w: an HTTP/2 (gRPC) peer, a worker or coordinator of a Sluice version whose control plane was gRPC: run one version", errMessageTooLarge)
	}
	if int64(n) > int64(s.limit) {
		s.close()
		return fmt.Errorf("%w: %d bytes, at most %d", errMessageTooLarge, n, s.limit)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(s.r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	*raw = b
	return nil
}

// Context is done once the connection is closed.
func (s *connStream) Context() context.Context { return s.ctx }

// sendEnd writes an End frame saying why this side ends the session, for
// the peer's log, within a second; the caller closes the connection.
func (s *connStream) sendEnd(epoch int64, why string) {
	if len(why) > maxEndLen {
		why = why[:maxEndLen]
	}
	b, err := encode(&frame{Epoch: epoch, End: why})
	if err != nil {
		return
	}
	s.wmu.Lock()
	s.writeTimeout = time.Second
	s.wmu.Unlock()
	_ = s.SendMsg(chunks(b)[0])
}
