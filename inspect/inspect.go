// Package inspect reads a completed checkpoint or savepoint offline, with
// no job running: its operators and subtasks, the size of each kind of
// state, the keys of keyed state (counted in full snapshots), the
// positions of the sources (Kafka offsets, datagen indexes) and the
// transactions and files that sinks pre-committed. The sluice command's
// "inspect" prints what it finds.
//
// It imports no connector: a connector registers the decoders of its
// positions and committables with package decode (the Kafka source and
// sink and the file sink do so in init functions), so a program decodes
// the state of the connectors it imports (cmd/sluice imports them all);
// what no decoder takes is reported as unknown, with its bytes.
package inspect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/state"
)

// ErrNoSnapshot is returned (wrapped) when a path holds no checkpoint or
// savepoint.
var ErrNoSnapshot = errors.New("no checkpoint or savepoint found")

// Report is what a checkpoint or savepoint holds.
type Report struct {
	// Dir is the directory of its _metadata.
	Dir            string
	Job            string
	CheckpointID   int64
	Kind           string
	TriggerTime    time.Time
	CompletionTime time.Time
	// StateSize is the bytes of all state it references; Files the
	// distinct files (shared ones included) and Inline the pieces kept in
	// _metadata.
	StateSize int64
	Files     int
	Inline    int

	Operators []Operator
	Sources   []SourcePosition
	Pending   []Committable
	// Problems are the pieces that could not be decoded; the rest of the
	// report stands.
	Problems []string
}

// Operator is one operator (by uid) and its subtasks.
type Operator struct {
	UID            string
	Parallelism    int
	MaxParallelism int
	Subtasks       []Subtask
}

// Subtask is one subtask's state.
type Subtask struct {
	Index    int
	Finished bool
	// Bytes of each kind of state.
	OperatorStateSize int64
	KeyedStateSize    int64
	ChannelStateSize  int64
	// InputChannels and OutputChannels count the channels whose in-flight
	// data an unaligned checkpoint persisted.
	InputChannels  int
	OutputChannels int
	// KeyGroups is the key-group range of its keyed state (nil without).
	KeyGroups *storage.KeyGroupRange
	// Backend is the keyed state backend that wrote it; Incremental is
	// set for an incremental snapshot (files of the backend, not counted).
	Backend     string
	Incremental bool
	// Keys is the number of distinct keys over all keyed states, -1 when
	// not counted (incremental snapshots).
	Keys     int64
	States   []KeyedState
	OpStates []OperatorState
	Commits  int
	Figures  *storage.Figures
}

// KeyedState is one keyed state of a subtask.
type KeyedState struct {
	Name string
	Kind string
	// Keys is the distinct keys with an entry; Entries the records (a key
	// has one per namespace, and one per map entry for map states).
	Keys    int64
	Entries int64
}

// OperatorState is one operator (non-keyed) state of a subtask.
type OperatorState struct {
	Name     string
	Kind     string
	Elements int
	Bytes    int64
}

// SourcePosition is where a source reader was.
type SourcePosition struct {
	Operator string
	// Subtask is the subtask whose state holds the entry.
	Subtask int
	// Kind is the format a connector registered with package decode
	// ("kafka" for source/kafka), "datagen" or "unknown".
	Kind string
	// Partitioned logs (Kafka): the topic partition and the offset of the
	// next record.
	Topic          string
	Partition      int32
	Offset         int64
	StoppingOffset int64
	// Datagen: the reader's subtask, parallelism and next index.
	ReaderSubtask int
	Parallelism   int
	Next          int64
	// Raw is the entry, for unknown kinds.
	Raw []byte
	// text is how the connector's decoder prints the position.
	text string
}

func (p SourcePosition) String() string {
	switch {
	case p.text != "":
		return p.text
	case p.Kind == "datagen":
		return fmt.Sprintf("next index %d (reader %d of %d)", p.Next, p.ReaderSubtask, p.Parallelism)
	}
	return fmt.Sprintf("%d bytes %x", len(p.Raw), p.Raw)
}

// sourceReaderState is the operator state in which the sluice API keeps
// the positions of source readers.
const sourceReaderState = "source-reader-state"

// Resolve finds the _metadata directory path stands for: a checkpoint or
// savepoint directory, its _metadata file, or a job's checkpoint
// directory (its newest chk-N). path is a file path or a URL of a
// registered storage scheme (s3://bucket/prefix/job).
func Resolve(path string) (string, error) {
	b, dir, chk, err := resolve(context.Background(), path)
	if err != nil {
		return "", err
	}
	if chk == "" || b == nil {
		return dir, nil
	}
	return storage.JoinLocation(dir, strings.TrimSuffix(chk, "/")), nil
}

// resolve returns, for path: its directory when it holds a _metadata
// (chk ""), else the job directory's backend b and its newest completed
// checkpoint's key prefix chk ("chk-N/").
func resolve(ctx context.Context, path string) (b storage.Backend, dir, chk string, err error) {
	path = strings.TrimRight(path, "/")
	if storage.IsURL(path) {
		if p, ok := strings.CutSuffix(path, "/_metadata"); ok {
			return nil, p, "", nil
		}
	} else if filepath.Base(path) == "_metadata" {
		return nil, filepath.Dir(path), "", nil
	}
	b, err = storage.Open(ctx, nil, path, nil)
	if err != nil {
		return nil, "", "", fmt.Errorf("%w at %s: %w", ErrNoSnapshot, path, err)
	}
	if _, err := b.Stat(ctx, "_metadata"); err == nil {
		return b, path, "", nil
	}
	chk, err = newestCheckpoint(ctx, b)
	if err != nil {
		return nil, "", "", fmt.Errorf("%w at %s: %w", ErrNoSnapshot, path, err)
	}
	return b, path, chk, nil
}

// newestCheckpoint returns the key prefix of the newest chk-N with a
// _metadata in b.
func newestCheckpoint(ctx context.Context, b storage.Backend) (string, error) {
	best := int64(-1)
	for o, err := range b.List(ctx, "chk-") {
		if err != nil {
			return "", err
		}
		dir, rest, ok := strings.Cut(o.Key, "/")
		n, _ := strings.CutPrefix(dir, "chk-")
		id, perr := strconv.ParseInt(n, 10, 64)
		if !ok || rest != "_metadata" || perr != nil {
			continue
		}
		best = max(best, id)
	}
	if best < 0 {
		return "", errors.New("no _metadata there nor in a chk-N directory")
	}
	return "chk-" + strconv.FormatInt(best, 10) + "/", nil
}

// Load reads the checkpoint or savepoint at path (see Resolve), checks
// every file it references, and decodes what it can.
func Load(path string) (*Report, error) {
	ctx := context.Background()
	b, dir, chk, err := resolve(ctx, path)
	if err != nil {
		return nil, err
	}
	var snap *storage.Snapshot
	if chk == "" {
		if snap, err = storage.LoadSnapshot(storage.OSFS{}, dir); err != nil {
			return nil, fmt.Errorf("load %s: %w", dir, err)
		}
	}
	for try := 0; snap == nil; try++ {
		snap, err = storage.LoadSnapshotFrom(b, chk)
		if err == nil {
			break
		}
		// A running job's newest checkpoint may be subsumed and deleted
		// between finding it and reading it: look again.
		if try == 4 || !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("load %s: %w", b.Path(strings.TrimSuffix(chk, "/")), err)
		}
		if chk, err = newestCheckpoint(ctx, b); err != nil {
			return nil, fmt.Errorf("%w at %s: %w", ErrNoSnapshot, dir, err)
		}
	}
	md := snap.Metadata
	r := &Report{
		Dir: snap.Dir, Job: md.Job, CheckpointID: md.CheckpointID, Kind: md.Kind,
		TriggerTime: time.UnixMilli(md.TriggerTimestamp), CompletionTime: time.UnixMilli(md.CompletionTimestamp),
		StateSize: md.StateSize(),
	}
	files := map[string]bool{}
	for _, h := range md.Handles() {
		if h.Handle.IsInline() {
			r.Inline++
		} else {
			files[snap.Path(h.Handle)] = true
		}
	}
	r.Files = len(files)
	byUID := map[string]*Operator{}
	var order []string
	for _, st := range md.Subtasks {
		op := byUID[st.OperatorUID]
		if op == nil {
			op = &Operator{UID: st.OperatorUID, Parallelism: st.Parallelism, MaxParallelism: st.MaxParallelism}
			byUID[st.OperatorUID] = op
			order = append(order, st.OperatorUID)
		}
		op.Subtasks = append(op.Subtasks, r.subtask(snap, st))
	}
	for _, uid := range order {
		op := byUID[uid]
		sort.Slice(op.Subtasks, func(i, j int) bool { return op.Subtasks[i].Index < op.Subtasks[j].Index })
		r.Operators = append(r.Operators, *op)
	}
	return r, nil
}

func (r *Report) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

func (r *Report) subtask(snap *storage.Snapshot, st storage.SubtaskState) Subtask {
	s := Subtask{Index: st.Subtask, Finished: st.Finished, Keys: -1, Commits: len(st.Committables), Figures: st.Figures}
	for _, h := range st.OperatorState {
		s.OperatorStateSize += h.Handle.Size
		states, err := readOperatorState(snap, h.Handle)
		if err != nil {
			r.problem("%s#%d operator state %s: %v", st.OperatorUID, st.Subtask, h.Name, err)
			continue
		}
		for _, os := range states {
			var n int64
			for _, e := range os.elems {
				n += int64(len(e))
			}
			s.OpStates = append(s.OpStates, OperatorState{Name: os.name, Kind: os.kind.String(), Elements: len(os.elems), Bytes: n})
			if os.name == sourceReaderState {
				for _, e := range os.elems {
					p := decodePosition(e)
					p.Operator, p.Subtask = st.OperatorUID, st.Subtask
					r.Sources = append(r.Sources, p)
				}
			}
		}
	}
	for _, c := range append(slices.Clip(st.InputChannelState), st.OutputChannelState...) {
		s.ChannelStateSize += c.Length
	}
	s.InputChannels, s.OutputChannels = len(st.InputChannelState), len(st.OutputChannelState)
	if len(st.KeyedState) > 0 {
		kg := st.KeyedState[0].KeyGroups
		for _, k := range st.KeyedState[1:] {
			kg.Start, kg.End = min(kg.Start, k.KeyGroups.Start), max(kg.End, k.KeyGroups.End)
		}
		s.KeyGroups = &kg
		s.Keys = 0
	}
	keys := map[string]bool{}
	byState := map[string]*KeyedState{}
	var stateOrder []string
	for _, k := range st.KeyedState {
		s.Backend = k.Backend
		if k.Handle == nil {
			s.Incremental = true
			s.Keys = -1
			for _, f := range k.Files {
				s.KeyedStateSize += f.Handle.Size
			}
			continue
		}
		s.KeyedStateSize += k.Handle.Size
		if err := countKeys(snap, *k.Handle, keys, byState, &stateOrder); err != nil {
			r.problem("%s#%d keyed state [%d,%d]: %v", st.OperatorUID, st.Subtask, k.KeyGroups.Start, k.KeyGroups.End, err)
			s.Keys = -1
		}
	}
	if s.Keys == 0 {
		s.Keys = int64(len(keys))
	}
	for _, name := range stateOrder {
		s.States = append(s.States, *byState[name])
	}
	for i, c := range st.Committables {
		p := decodeCommittable(st.CommittableKind, c)
		p.Operator, p.Subtask, p.Index = st.OperatorUID, st.Subtask, i
		r.Pending = append(r.Pending, p)
	}
	return s
}

// countKeys reads a full keyed snapshot and counts its keys, per state
// and over all states (distinct key bytes).
func countKeys(snap *storage.Snapshot, h storage.StateHandle, all map[string]bool, byState map[string]*KeyedState, order *[]string) error {
	rc, err := snap.Open(h)
	if err != nil {
		return err
	}
	defer rc.Close()
	var states []state.StateMeta
	perState := map[string]map[string]bool{}
	err = state.ReadKeyedSnapshot(rc, nil, func(hd *state.KeyedSnapshotHeader) error {
		states = hd.States
		for _, m := range states {
			if byState[m.Name] == nil {
				byState[m.Name] = &KeyedState{Name: m.Name, Kind: m.Kind.String()}
				*order = append(*order, m.Name)
			}
			perState[m.Name] = map[string]bool{}
		}
		return nil
	}, func(rec *state.KeyedRecord) error {
		name := states[rec.State].Name
		k := string(rec.Key)
		all[k] = true
		perState[name][k] = true
		byState[name].Entries++
		return nil
	})
	if err != nil {
		return err
	}
	// Read to the end so the checksum of the whole stream is verified.
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return err
	}
	for name, keys := range perState {
		byState[name].Keys += int64(len(keys))
	}
	return nil
}
