package lifecycle

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/internal/datadriven"
)

// layout is the job directory of the scenarios: /ck/job.
type layout struct{}

func (layout) JobDir() string                { return "/ck/job" }
func (layout) JobResultPath() string         { return "/ck/job/job-result" }
func (layout) CheckpointDir(id int64) string { return fmt.Sprintf("/ck/job/chk-%d", id) }

// TestLifecycleScenarios runs testdata/*. Times (t=) are milliseconds
// since the epoch.
//
//	new [restore-from=] [claim] [fresh-start] [allow-fallback] [retention=] [no-storage]
//	----
//	start       input lines: the facts
//	    result status= run= [last=] [retained] [clean] [savepoint=] [origin=]
//	    chk <id> [run=] [committed] [dir=] [origin=] a usable completed checkpoint
//	    corrupt <id> [run=] [committed] [no-metadata] [err=] [origin=]
//	    pointer <id> [path=]                         the HA store's pointer
//	    snapshot <id> dir= [kind=] [run=]           RestoreFrom, loaded
//	    snapshot-error <text> | list-error <text>
//	failover owned=(ids)   input lines: chk, corrupt, list-error
//	end t= status= [owned=(ids)] [err=] [savepoint=] [publish]
//	published [err=] | written [err=] | state
func TestLifecycleScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, (&scenario{}).run)
	})
}

// scenario is the machine of one scenario file and its clock.
type scenario struct {
	m   *Machine
	now time.Time
}

func (s *scenario) run(t *testing.T, d *datadriven.TestData) string {
	if d.Has("t") {
		s.now = time.UnixMilli(d.Int(t, "t", 0))
	}
	if d.Cmd == "new" {
		cfg := Config{JobID: "job", RunID: "r9", Layout: layout{},
			RestoreFrom: d.Str(t, "restore-from", ""), Claim: d.Bool(t, "claim", false),
			FreshStart: d.Bool(t, "fresh-start", false), AllowFallbackPastCommitted: d.Bool(t, "allow-fallback", false)}
		if d.Has("no-storage") {
			cfg.Layout = nil
		}
		var err error
		if cfg.Retention, err = checkpoint.ParseRetention(d.Str(t, "retention", "delete-on-cancellation")); err != nil {
			d.Fatalf(t, "%v", err)
		}
		s.m, s.now = New(cfg), time.UnixMilli(0)
		return s.m.String()
	}
	m := s.m
	if m == nil {
		d.Fatalf(t, "no machine: start with new")
	}
	var acts []Action
	var err error
	switch d.Cmd {
	case "start":
		acts, err = m.Start(s.now, scenarioFacts(t, d, m.cfg.Layout != nil))
	case "failover":
		var owned []int64
		for _, v := range d.Vals("owned") {
			owned = append(owned, parseID(t, d, v))
		}
		f := scenarioFacts(t, d, true)
		acts, err = m.Failover(s.now, owned, f.Checkpoints, f.ListErr)
	case "end":
		e := End{Status: d.Str(t, "status", storage.ResultFinished), Savepoint: d.Str(t, "savepoint", ""), Publish: d.Bool(t, "publish", false),
			Err: optErr(d.Str(t, "err", ""))}
		for _, v := range d.Vals("owned") {
			e.Owned = append(e.Owned, parseID(t, d, v))
		}
		acts = m.End(s.now, e)
	case "published":
		acts = m.ResultPublished(s.now, optErr(d.Str(t, "err", "")))
	case "written":
		acts = m.ResultWritten(s.now, optErr(d.Str(t, "err", "")))
	case "state":
		return m.String()
	default:
		d.Fatalf(t, "unknown command")
	}
	var out []string
	for _, a := range acts {
		out = append(out, a.String())
	}
	if err != nil {
		out = append(out, describeError(err))
	}
	return strings.Join(append(out, m.String()), "\n")
}

func optErr(s string) error {
	if s == "" {
		return nil
	}
	return errors.New(s)
}

func parseID(t *testing.T, d *datadriven.TestData, s string) int64 {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		d.Fatalf(t, "checkpoint id %q: %v", s, err)
	}
	return id
}

// scenarioFacts reads the facts of the input lines.
func scenarioFacts(t *testing.T, d *datadriven.TestData, withStorage bool) Facts {
	var f Facts
	rec := &storage.Recovery{}
	for _, line := range strings.Split(d.Input, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		kind, rest := fields[0], fields[1:]
		args := map[string]string{}
		var pos []string
		for _, a := range rest {
			if k, v, ok := strings.Cut(a, "="); ok {
				args[k] = v
			} else if _, flag := map[string]bool{"committed": true, "retained": true, "clean": true, "no-metadata": true}[a]; flag {
				args[a] = "true"
			} else {
				pos = append(pos, a)
			}
		}
		id := func() int64 {
			if len(pos) == 0 {
				d.Fatalf(t, "%s: no checkpoint id", line)
			}
			return parseID(t, d, pos[0])
		}
		md := func(id int64) *storage.Metadata {
			m := &storage.Metadata{CheckpointID: id, RunID: args["run"], Kind: storage.KindCheckpoint, Origin: args["origin"]}
			if k := args["kind"]; k != "" {
				m.Kind = k
			}
			if args["committed"] != "" {
				m.Subtasks = []storage.SubtaskState{{OperatorUID: "sink", Committables: [][]byte{{1}}}}
			}
			return m
		}
		switch kind {
		case "result":
			r := &storage.JobResult{JobID: "job", Status: args["status"], RunID: args["run"], Savepoint: args["savepoint"], Origin: args["origin"],
				Retained: args["retained"] != "", Clean: args["clean"] != "", EndTimestamp: 1000}
			if s := args["last"]; s != "" {
				r.LastCheckpoint = parseID(t, d, s)
			}
			f.Result = r
		case "chk":
			id := id()
			dir := args["dir"]
			if dir == "" {
				dir = layout{}.CheckpointDir(id)
			}
			rec.Retained = append(rec.Retained, &storage.Snapshot{Metadata: md(id), Dir: dir})
			rec.MaxID = max(rec.MaxID, id)
		case "corrupt":
			id := id()
			msg := args["err"]
			if msg == "" {
				msg = "checksum mismatch"
			}
			u := storage.Unusable{ID: id, Err: &storage.FileError{Path: layout{}.CheckpointDir(id) + "/op-0", Err: errors.New(msg)}}
			if args["no-metadata"] == "" {
				u.Metadata = md(id)
			}
			rec.Unusable = append(rec.Unusable, u)
			rec.MaxID = max(rec.MaxID, id)
		case "pointer":
			p := &Pointer{ID: id(), Path: args["path"]}
			if p.Path == "" {
				p.Path = layout{}.CheckpointDir(p.ID)
			}
			f.Pointer = p
		case "snapshot":
			m := md(id())
			if m.Kind == storage.KindCheckpoint && args["kind"] == "" && !strings.HasPrefix(args["dir"], "/ck/") {
				m.Kind = storage.KindSavepoint
			}
			f.Snapshot = &storage.Snapshot{Metadata: m, Dir: args["dir"]}
		case "snapshot-error":
			f.SnapshotErr = errors.New(strings.Join(rest, " "))
		case "list-error":
			f.ListErr = errors.New(strings.Join(rest, " "))
		default:
			d.Fatalf(t, "unknown fact %q", kind)
		}
	}
	newestFirst := func(a, b int64) int { return int(b - a) }
	slices.SortFunc(rec.Retained, func(a, b *storage.Snapshot) int {
		return newestFirst(a.Metadata.CheckpointID, b.Metadata.CheckpointID)
	})
	slices.SortFunc(rec.Unusable, func(a, b storage.Unusable) int { return newestFirst(a.ID, b.ID) })
	if withStorage {
		f.Checkpoints = rec
	}
	return f
}

// describeError names the sentinels err wraps, then says it.
func describeError(err error) string {
	var tags []string
	for _, s := range []struct {
		err  error
		name string
	}{{ErrJobTerminated, "ErrJobTerminated"}, {ErrFreshStartRefused, "ErrFreshStartRefused"},
		{ErrFallbackPastCommitted, "ErrFallbackPastCommitted"}, {ErrRestore, "ErrRestore"}} {
		if errors.Is(err, s.err) {
			tags = append(tags, s.name)
		}
	}
	var fe *FatalError
	if errors.As(err, &fe) {
		tags = append(tags, "fatal")
	}
	return fmt.Sprintf("refused [%s]: %v", strings.Join(tags, " "), err)
}
