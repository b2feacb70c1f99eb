package runtime

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/runtime/network"
)

type countingInput struct{ n int }

func (c *countingInput) ProcessElement(int64, int64) error { c.n++; return nil }

// TestCorruptFramingFailsTask: bytes on a channel that are not framed
// records fail the task with ErrDecode naming the edge, subtask and
// channel, instead of being dropped silently.
func TestCorruptFramingFailsTask(t *testing.T) {
	in := &countingInput{}
	dec, err := TypeOf[int64](codec.Int[int64]{}).decoder(in)
	if err != nil {
		t.Fatal(err)
	}
	edge := &Edge{From: &Node{Name: "up"}, To: &Node{Name: "down"}}
	ci := &channelInput{gate: &gateInput{edge: edge}, index: 1, reader: network.NewRecordReader(), decoder: dec}
	// One good record (flag 0 + 8 bytes), then a length prefix that
	// overflows a uvarint.
	good := append([]byte{9, 0}, make([]byte, 8)...)
	ci.reader.FeedRaw(append(good, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01))
	task := &Task{subtask: 3, mailbox: newMailbox(make(chan struct{}, 1)), cur: ci}
	_, err = task.processInput()
	if !errors.Is(err, ErrDecode) || !errors.Is(err, network.ErrCorruptFrame) {
		t.Fatalf("processInput: %v, want ErrDecode wrapping ErrCorruptFrame", err)
	}
	for _, want := range []string{`"up" -> "down"`, "subtask 3", "channel 1", "#1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if in.n != 1 {
		t.Fatalf("%d records processed before the corrupt frame, want 1", in.n)
	}
}
