package checkpoint

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/internal/datadriven"
)

// TestCoordinatorScenarios runs testdata/coordinator/*. Times (t=) are
// milliseconds since the epoch; durations take Go syntax or milliseconds.
//
//	new [interval=] [timeout=] [min-pause=] [max-concurrent=] [tolerable=] [retained=]
//	    [unaligned] [aligned-timeout=] [mode=] [retention=]
//	<vertex>.<subtask> [up=(ids)] [ops=(uids)]     one line per task; ids from 0
//	----
//	start t= | tick t= | request t= [kind=] | savepoint t= dir= [stop] [drain] | stop t=
//	ack t= task= id= [shared=(names)] [size=] [persisted=] [processed=] [delay=] [unaligned]
//	decline t= task= id= [reason=] | written t= id= [err=] | finished t= task=
//	end-of-input t= task= | suspend t= | shutdown t= term= | state | stats [id=]
//	region-failed t= tasks=(ids) | region-restored t=
//	restore t= max-id= [from=] [from-savepoint]     input lines: <id> [shared=(names)] [pinned]
func TestCoordinatorScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/coordinator", func(t *testing.T, path string) {
		var c *Coordinator
		var now time.Time
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Has("t") {
				now = time.UnixMilli(d.Int(t, "t", 0))
			}
			if d.Cmd == "new" {
				var err error
				c, err = newScenarioCoordinator(t, d)
				if err != nil {
					return "error: " + err.Error()
				}
				now = time.UnixMilli(0)
				return c.String()
			}
			if c == nil {
				d.Fatalf(t, "no coordinator: start with new")
			}
			var acts []CoordinatorAction
			var err error
			switch d.Cmd {
			case "start":
				c.Start(now)
				return c.String()
			case "tick":
				acts = c.Tick(now)
			case "request":
				kind := KindCheckpoint
				if d.Str(t, "kind", "") == "full-checkpoint" {
					kind = KindFullCheckpoint
				}
				acts, err = c.RequestCheckpoint(now, kind)
			case "savepoint":
				var id int64
				id, acts, err = c.TriggerSavepoint(now, SavepointRequest{Dir: d.Str(t, "dir", "/savepoints/sp"), Stop: d.Bool(t, "stop", false), Drain: d.Bool(t, "drain", false)})
				if err == nil && id != acts[len(acts)-1].(Trigger).Barrier.ID {
					d.Fatalf(t, "returned id %d", id)
				}
			case "stop":
				var id int64
				id, acts, err = c.TriggerStop(now)
				if err == nil && id != acts[len(acts)-1].(Trigger).Barrier.ID {
					d.Fatalf(t, "returned id %d", id)
				}
			case "ack":
				acts = c.Ack(now, TaskID(d.Int(t, "task", 0)), d.Int(t, "id", 0), scenarioStates(t, c, d), TaskFigures{
					StartDelay:       d.Duration(t, "delay", 0),
					Alignment:        d.Duration(t, "alignment", 0),
					ProcessedData:    d.Int(t, "processed", 0),
					PersistedData:    d.Int(t, "persisted", 0),
					CheckpointedSize: d.Int(t, "size", 0),
					StateSize:        d.Int(t, "size", 0),
					Unaligned:        d.Bool(t, "unaligned", false),
				})
			case "decline":
				reason, perr := ParseReason(d.Str(t, "reason", "declined"))
				if perr != nil {
					d.Fatalf(t, "%v", perr)
				}
				var cause error
				if msg := d.Str(t, "cause", ""); msg != "" {
					cause = errors.New(strings.ReplaceAll(msg, "_", " "))
				}
				acts = c.Decline(now, TaskID(d.Int(t, "task", 0)), d.Int(t, "id", 0), reason, cause)
			case "written":
				id := d.Int(t, "id", 0)
				var werr error
				if msg := d.Str(t, "err", ""); msg != "" {
					werr = errors.New(strings.ReplaceAll(msg, "_", " "))
				}
				acts = c.MetadataWritten(now, id, d.Str(t, "path", fmt.Sprintf("chk-%d/_metadata", id)), werr)
			case "finished":
				acts = c.TaskFinished(now, TaskID(d.Int(t, "task", 0)))
			case "end-of-input":
				acts = c.TaskEndOfInput(now, TaskID(d.Int(t, "task", 0)))
			case "region-failed":
				var tasks []TaskID
				for _, v := range d.Vals("tasks") {
					id, perr := strconv.Atoi(v)
					if perr != nil {
						d.Fatalf(t, "tasks: %v", perr)
					}
					tasks = append(tasks, TaskID(id))
				}
				acts, err = c.RegionFailed(now, tasks)
			case "region-restored":
				acts = c.RegionRestored(now)
			case "suspend":
				acts = c.Suspend(now)
			case "shutdown":
				term := map[string]Termination{"finished": JobFinished, "canceled": JobCanceled, "failed": JobFailed}[d.Str(t, "term", "canceled")]
				acts = c.Shutdown(now, term)
			case "restore":
				acts, err = scenarioRestore(t, c, now, d)
			case "state":
				return c.String()
			case "stats":
				return formatStats(t, c, d)
			default:
				d.Fatalf(t, "unknown command")
			}
			if err != nil {
				return "error: " + err.Error()
			}
			return formatCoordinatorActions(acts)
		})
	})
}

func newScenarioCoordinator(t *testing.T, d *datadriven.TestData) (*Coordinator, error) {
	cfg := Config{
		Interval:                 d.Duration(t, "interval", 0),
		Timeout:                  d.Duration(t, "timeout", 0),
		MinPause:                 d.Duration(t, "min-pause", 0),
		MaxConcurrent:            int(d.Int(t, "max-concurrent", 0)),
		TolerableFailed:          int(d.Int(t, "tolerable", 0)),
		Unaligned:                d.Bool(t, "unaligned", false),
		AlignedCheckpointTimeout: d.Duration(t, "aligned-timeout", 0),
		RetainedCheckpoints:      int(d.Int(t, "retained", 0)),
		Directory:                "/checkpoints",
	}
	var err error
	if cfg.Mode, err = ParseMode(d.Str(t, "mode", "exactly-once")); err != nil {
		d.Fatalf(t, "%v", err)
	}
	if cfg.Retention, err = ParseRetention(d.Str(t, "retention", "no-externalized-checkpoints")); err != nil {
		d.Fatalf(t, "%v", err)
	}
	var tasks []TaskInfo
	parallelism := map[string]int{}
	for i, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		if line == "" {
			continue
		}
		fields := strings.Fields(line)
		vertex, sub, _ := strings.Cut(fields[0], ".")
		n, _ := strconv.Atoi(sub)
		ti := TaskInfo{ID: TaskID(i), Vertex: vertex, Subtask: n, Operators: []string{vertex}}
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			list := strings.Split(strings.Trim(v, "()"), ",")
			switch k {
			case "up":
				for _, s := range list {
					id, _ := strconv.Atoi(s)
					ti.Upstream = append(ti.Upstream, TaskID(id))
				}
			case "ops":
				ti.Operators = list
			}
		}
		parallelism[vertex]++
		tasks = append(tasks, ti)
	}
	for i := range tasks {
		tasks[i].Parallelism = parallelism[tasks[i].Vertex]
	}
	return NewCoordinator("job", cfg, tasks)
}

// scenarioStates is the state a task acknowledges: one subtask state per
// operator, the first with the shared files named by shared=.
func scenarioStates(t *testing.T, c *Coordinator, d *datadriven.TestData) []storage.SubtaskState {
	info := c.byID[TaskID(d.Int(t, "task", 0))]
	if info == nil {
		return nil
	}
	var states []storage.SubtaskState
	for i, uid := range info.Operators {
		st := storage.SubtaskState{OperatorUID: uid, Subtask: info.Subtask, Parallelism: info.Parallelism}
		if i == 0 {
			var files []storage.NamedHandle
			for _, name := range d.Vals("shared") {
				files = append(files, storage.NamedHandle{Name: name + ".sst", Handle: storage.StateHandle{Path: name, Shared: true, Size: 1}})
			}
			if files != nil {
				st.KeyedState = []storage.KeyedStateHandle{{KeyGroups: storage.KeyGroupRange{Start: 0, End: 127}, Files: files}}
			}
		}
		states = append(states, st)
	}
	return states
}

func scenarioRestore(t *testing.T, c *Coordinator, now time.Time, d *datadriven.TestData) ([]CoordinatorAction, error) {
	var retained, pinned []*storage.Metadata
	var from *storage.Metadata
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		if line == "" {
			continue
		}
		fields := strings.Fields(line)
		id, _ := strconv.ParseInt(fields[0], 10, 64)
		md := &storage.Metadata{Version: 1, CheckpointID: id, Kind: storage.KindCheckpoint, Subtasks: []storage.SubtaskState{{OperatorUID: "src"}}}
		for _, f := range fields[1:] {
			if v, ok := strings.CutPrefix(f, "shared="); ok {
				var files []storage.NamedHandle
				for _, name := range strings.Split(strings.Trim(v, "()"), ",") {
					files = append(files, storage.NamedHandle{Name: name, Handle: storage.StateHandle{Path: name, Shared: true}})
				}
				md.Subtasks[0].KeyedState = []storage.KeyedStateHandle{{Files: files}}
			}
		}
		if slices.Contains(fields[1:], "pinned") {
			pinned = append(pinned, md)
		} else {
			retained = append(retained, md)
		}
	}
	if id := d.Int(t, "from", 0); id > 0 {
		from = &storage.Metadata{Version: 1, CheckpointID: id, Kind: storage.KindCheckpoint}
		if d.Bool(t, "from-savepoint", false) {
			from.Kind = storage.KindSavepoint
		}
	}
	acts, err := c.Restore(now, retained, from, d.Int(t, "max-id", 0))
	c.Pin(pinned)
	return acts, err
}

func formatCoordinatorActions(acts []CoordinatorAction) string {
	if len(acts) == 0 {
		return "(none)"
	}
	var b strings.Builder
	for _, a := range acts {
		fmt.Fprintln(&b, a)
	}
	return b.String()
}

func formatStats(t *testing.T, c *Coordinator, d *datadriven.TestData) string {
	var b strings.Builder
	if d.Has("id") {
		cs, ok := c.CheckpointStats(d.Int(t, "id", 0))
		if !ok {
			return "no such checkpoint"
		}
		fmt.Fprintf(&b, "checkpoint %d %s %s unaligned=%t end-to-end=%s acked=%d/%d size=%d processed=%d persisted=%d discarded=%t",
			cs.ID, cs.Kind, cs.Status, cs.Unaligned, cs.EndToEndDuration, cs.NumAcknowledged, cs.NumTasks, cs.StateSize, cs.ProcessedData, cs.PersistedData, cs.Discarded)
		if cs.Path != "" {
			fmt.Fprintf(&b, " path=%s", cs.Path)
		}
		if cs.Status == StatusFailed {
			fmt.Fprintf(&b, "\nfailure %s: %s", cs.FailureReason, cs.FailureMessage)
		}
		for _, ts := range cs.Tasks {
			fmt.Fprintf(&b, "\n  %s#%d acked=%t end-to-end=%s start-delay=%s persisted=%d unaligned=%t",
				ts.Vertex, ts.Subtask, ts.Acknowledged, ts.EndToEndDuration, ts.Figures.StartDelay, ts.Figures.PersistedData, ts.Figures.Unaligned)
		}
		return b.String()
	}
	s := c.Stats()
	fmt.Fprintf(&b, "restored=%d total=%d in-progress=%d completed=%d failed=%d", s.Restored, s.Total, s.InProgress, s.Completed, s.Failed)
	for _, l := range []struct {
		name string
		cs   *Stats
	}{{"completed", s.LatestCompleted}, {"savepoint", s.LatestSavepoint}, {"failed", s.LatestFailed}} {
		if l.cs != nil {
			fmt.Fprintf(&b, "\nlatest %s: %d", l.name, l.cs.ID)
		}
	}
	if r := s.LatestRestored; r != nil {
		fmt.Fprintf(&b, "\nrestored from %d savepoint=%t", r.ID, r.IsSavepoint)
	}
	var ids []string
	for _, cs := range s.History {
		ids = append(ids, fmt.Sprintf("%d:%s", cs.ID, cs.Status))
	}
	fmt.Fprintf(&b, "\nhistory %s", strings.Join(ids, " "))
	return b.String()
}

// TestCoordinatorTriggersAfterSlowListener drives the coordinator as the
// runtime does: it carries out the actions of a call in order, and the
// checkpoint listener runs when a checkpoint completes, holding the driver
// for longer than the checkpoint timeout; the driver then ticks at the
// coordinator's next wakeup (or now, when that has passed). The checkpoint
// due when checkpoint 1 completes must be triggered after the hold, with
// its time and its timeout starting then, so it is not expired the moment
// the listener returns.
func TestCoordinatorTriggersAfterSlowListener(t *testing.T) {
	cfg := Config{Interval: time.Second, Timeout: 10 * time.Second, Directory: "/ck"}
	c, err := NewCoordinator("job", cfg, []TaskInfo{{ID: 0, Vertex: "src", Operators: []string{"src"}}})
	if err != nil {
		t.Fatal(err)
	}
	const hold = 3 * 10 * time.Second // the listener's hold: three timeouts
	now := time.UnixMilli(0)
	c.Start(now)
	var triggers []Trigger
	var aborted []int64
	var drive func(acts []CoordinatorAction)
	drive = func(acts []CoordinatorAction) {
		for _, a := range acts {
			switch a := a.(type) {
			case Trigger:
				triggers = append(triggers, a)
			case WriteMetadata:
				id := a.Metadata.CheckpointID
				acts := c.MetadataWritten(now, id, fmt.Sprintf("/ck/job/chk-%d/_metadata", id), nil)
				now = now.Add(hold) // the listener hears of the completion
				drive(acts)
			case NotifyAborted:
				aborted = append(aborted, a.ID)
			}
		}
	}
	tick := func() {
		if next, ok := c.NextWakeup(); ok && next.After(now) {
			now = next
		}
		drive(c.Tick(now))
	}
	tick() // checkpoint 1 at 1 s
	tick() // 2 s: checkpoint 2 is due while 1 is pending
	if len(triggers) != 1 || c.PendingIDs()[0] != 1 {
		t.Fatalf("triggers %v, pending %v: want checkpoint 1 alone pending", triggers, c.PendingIDs())
	}
	ackAt := now.Add(500 * time.Millisecond)
	now = ackAt
	drive(c.Ack(now, 0, 1, []storage.SubtaskState{{OperatorUID: "src"}}, TaskFigures{}))
	listenerReturned := ackAt.Add(hold)
	if !now.Equal(listenerReturned) {
		t.Fatalf("the listener did not run: now %v", now)
	}
	tick()
	if len(aborted) > 0 {
		t.Errorf("checkpoints %v aborted: the checkpoint due at the completion expired during the listener's hold", aborted)
	}
	if len(triggers) != 2 {
		t.Fatalf("%d triggers after checkpoint 1 completed, want checkpoint 2 triggered: %v", len(triggers), triggers)
	}
	next := triggers[1]
	if got, want := next.Barrier.Timestamp, listenerReturned.UnixMilli(); got < want {
		t.Errorf("checkpoint %d triggered at %d ms, before the listener returned at %d ms", next.Barrier.ID, got, want)
	}
	if !slices.Equal(c.PendingIDs(), []int64{next.Barrier.ID}) {
		t.Errorf("pending %v, want checkpoint %d pending", c.PendingIDs(), next.Barrier.ID)
	}
	// Its timeout runs from the end of the hold: still pending just before.
	now = listenerReturned.Add(cfg.Timeout - time.Millisecond)
	drive(c.Tick(now))
	if len(aborted) > 0 {
		t.Errorf("checkpoint %d expired at %v, less than the timeout after the hold ended at %v", next.Barrier.ID, now, listenerReturned)
	}
}
