package control

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil"
)

// Short heartbeats for these tests only; the side whose peer is not
// paused keeps a long timeout, so a slow machine cannot make it the one
// that times out.
const (
	testInterval     = 20 * time.Millisecond
	testShortTimeout = 100 * time.Millisecond
	testLongTimeout  = time.Minute
)

func TestHeartbeatsKeepTheSessionAlive(t *testing.T) {
	const timeout = 400 * time.Millisecond
	s, coord, _ := newServer(t, func(c *ServerConfig) { c.HeartbeatInterval, c.HeartbeatTimeout = testInterval, timeout })
	c, _, _ := dial(t, s, "w1", func(c *ClientConfig) { c.HeartbeatInterval, c.HeartbeatTimeout = testInterval, timeout })
	coord.await(t, "the registration", 1)
	ss := s.worker("w1")
	// Heartbeats for well past the timeout, both ways, and nothing lost.
	want := int64(3 * timeout / testInterval)
	testutil.Await(t, "heartbeats both ways", func() bool { return ss.l.beats.Load() >= want && c.l.beats.Load() >= want })
	if ev := coord.snapshot(); len(ev) != 1 {
		t.Errorf("events %#v, want only the registration", ev)
	}
	select {
	case err := <-c.Lost():
		t.Errorf("the client lost its coordinator: %v", err)
	default:
	}
}

func TestWorkerHeartbeatTimeout(t *testing.T) {
	s, coord, _ := newServer(t, func(c *ServerConfig) { c.HeartbeatInterval, c.HeartbeatTimeout = testInterval, testShortTimeout })
	c, _, _ := dial(t, s, "w1", func(c *ClientConfig) { c.HeartbeatInterval, c.HeartbeatTimeout = testInterval, testLongTimeout })
	coord.await(t, "the registration", 1)
	testutil.Await(t, "a heartbeat of the worker", func() bool { return s.worker("w1").l.beats.Load() > 0 })

	c.pauseBeats.Store(true) // the worker hangs: its heartbeats stop, its stream stays
	cause := coord.lost(t, "w1")
	if !errors.Is(cause, ErrHeartbeatTimeout) {
		t.Fatalf("worker lost with %v, want ErrHeartbeatTimeout", cause)
	}
	mustContain(t, "the cause", cause.Error(), "worker w1", "heartbeat.timeout 100ms")
	// The coordinator ended the session: the worker learns of it, and why.
	err := awaitLost(t, c)
	if !errors.Is(err, ErrDisconnected) {
		t.Errorf("the worker lost its coordinator with %v, want ErrDisconnected", err)
	}
	mustContain(t, "the worker's cause", err.Error(), "heartbeat timeout")
}

func TestCoordinatorHeartbeatTimeout(t *testing.T) {
	s, coord, _ := newServer(t, func(c *ServerConfig) { c.HeartbeatInterval, c.HeartbeatTimeout = testInterval, testLongTimeout })
	c, _, _ := dial(t, s, "w1", func(c *ClientConfig) { c.HeartbeatInterval, c.HeartbeatTimeout = testInterval, testShortTimeout })
	coord.await(t, "the registration", 1)
	testutil.Await(t, "a heartbeat of the coordinator", func() bool { return c.l.beats.Load() > 0 })

	s.pauseBeats.Store(true)
	err := awaitLost(t, c)
	if !errors.Is(err, ErrHeartbeatTimeout) {
		t.Fatalf("the worker lost its coordinator with %v, want ErrHeartbeatTimeout", err)
	}
	mustContain(t, "the cause", err.Error(), "coordinator 127.0.0.1:")
	// The worker dropped the stream: the coordinator reports it lost.
	if cause := coord.lost(t, "w1"); !errors.Is(cause, ErrDisconnected) {
		t.Errorf("worker lost with %v, want ErrDisconnected", cause)
	}
}
