package autoscaler

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
)

// The bounds of the state a Driver keeps (KeepState), which a leader
// writes to etcd with the job's scaling state at every step that
// changes it: at most maxKeptSamples samples of the metrics window
// (Flink's defaults, a 15 min window read every 10 s, make 90; a window
// of more is thinned, State.Thinned), and at most maxKeptBytes encoded
// (a sample holds every subtask's busy time: 128 subtasks of 8 vertices
// make about 15 KiB). Over the bytes, the samples are halved until it
// fits, and dropped when two do not; the next leader then collects its
// window afresh. etcd refuses a request over 1.5 MiB by default.
const (
	maxKeptSamples = 64
	maxKeptBytes   = 256 << 10
)

// driverState is what a Driver keeps for the one that takes over: its
// machine's state, the latest decision (the REST API's and the Kubernetes
// operator's, which records an event per decision) and its rescales.
type driverState struct {
	Machine      State       `json:"machine"`
	LastDecision *Evaluation `json:"lastDecision,omitempty"`
	Rescales     int64       `json:"rescales,omitempty"`
}

// KeepState has the driver give keep its state, encoded, after every
// step that changed it (keep must not block for long: the steps wait);
// Resume on another driver of the job goes on from it. It is called
// before Run.
func (d *Driver) KeepState(keep func([]byte)) { d.keep = keep }

// save gives keep the state when it changed since the last time.
func (d *Driver) save() {
	if d.keep == nil {
		return
	}
	data, err := d.encodeState()
	if err != nil {
		d.log.Warn("autoscaler state not kept; a coordinator taking over resumes an older one", "err", err)
		return
	}
	if bytes.Equal(data, d.saved) {
		return
	}
	d.saved = data
	d.keep(data)
}

// encodeState encodes the driver's state within maxKeptSamples and
// maxKeptBytes.
func (d *Driver) encodeState() ([]byte, error) {
	d.mu.Lock()
	st := driverState{Machine: d.m.State().Thinned(maxKeptSamples), Rescales: d.rescales}
	if !d.decision.Time.IsZero() {
		ev := d.decision
		st.LastDecision = &ev
	}
	d.mu.Unlock()
	for {
		data, err := json.Marshal(st)
		if err != nil {
			return nil, fmt.Errorf("autoscaler: encode its state: %w", err)
		}
		n := len(st.Machine.Samples)
		switch {
		case len(data) <= maxKeptBytes:
			return data, nil
		case n > 2:
			st.Machine = st.Machine.Thinned(n / 2)
		case n > 0:
			d.log.Warn("autoscaler state too large to keep its metrics window; a coordinator taking over collects it afresh",
				"bytes", len(data), "limit", maxKeptBytes)
			st.Machine.Samples = nil
		case st.LastDecision != nil:
			st.LastDecision = nil
		default:
			return nil, fmt.Errorf("autoscaler: its state takes %d bytes, over the %d kept", len(data), maxKeptBytes)
		}
	}
}

// Resume goes on from the state another driver of the job kept
// (KeepState): its machine's (Machine.Resume), its latest decision and
// its count of rescales. It is called before Run; a state that cannot be
// read or does not fit the machine changes nothing.
func (d *Driver) Resume(data []byte) error {
	var st driverState
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("autoscaler: read the state kept: %w", err)
	}
	if err := d.m.Resume(st.Machine); err != nil {
		return fmt.Errorf("autoscaler: resume the state kept: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rescales = st.Rescales
	if st.LastDecision != nil {
		d.decision = *st.LastDecision
	}
	d.saved = bytes.Clone(data)
	d.log.LogAttrs(context.Background(), slog.LevelInfo, "autoscaler resumes the state kept",
		slog.Any("parallelism", st.Machine.Parallelism), slog.Time("since", st.Machine.Since),
		slog.Int("samples", len(st.Machine.Samples)), slog.Any("pending", st.Machine.Pending),
		slog.Int("delayedScaleDowns", len(st.Machine.Delayed)), slog.Int64("rescales", st.Rescales))
	return nil
}
