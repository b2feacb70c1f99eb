package sluicetest

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/runtime"
)

// Snapshot is a snapshot of a harness's operator: a savepoint directory in
// the checkpoint format (the one holding _metadata). A harness restores
// from it (RestoreFrom(s.Path)), at any parallelism, and so does a real
// job (sluice.WithRestoreFrom(s.Path)): the operator's state is found by
// its uid.
type Snapshot struct {
	// Path is the savepoint directory.
	Path string
	// ID is the snapshot's checkpoint id.
	ID int64
}

// snapshotter writes a harness's snapshots into a directory of the test.
type snapshotter struct {
	store  *storage.Storage
	parent string
	next   int64
}

// Snapshot takes a snapshot of every subtask of the operator, as a
// savepoint of the job would: the mails queued before it run first (a
// barrier queues behind them), then each subtask's synchronous part (its
// StateSnapshotter: a function's FunctionSnapshotter, a two-phase-commit
// sink's pre-commit) and its backends' snapshots, written in the
// checkpoint encoding. Snapshot ids count up from 1 in each harness.
func (c *core) Snapshot() *Snapshot {
	c.tb.Helper()
	c.check("run mails", c.runMails())
	sn := &c.snaps
	if sn.store == nil {
		root := c.tb.TempDir()
		st, err := storage.New(storageFS, root, "sluicetest", storage.Options{InlineThreshold: storage.DefaultInlineThreshold, Logger: discardLogger()})
		c.check("open the snapshot directory", err)
		sn.store, sn.parent = st, root
	}
	sn.next++
	id := sn.next
	dir, err := sn.store.NewSavepointDir(sn.parent)
	c.check("snapshot", err)
	loc, err := sn.store.SavepointAt(dir, id)
	c.check("snapshot", err)
	md := &storage.Metadata{Version: storage.MetadataVersion, Job: "sluicetest", CheckpointID: id,
		Kind: storage.KindSavepoint, TriggerTimestamp: time.Now().UnixMilli()}
	for _, s := range c.subs {
		st, err := runtime.SnapshotOperator(loc, c.node, s.oc, s.op)
		c.check(fmt.Sprintf("snapshot %d of subtask %d", id, s.index), err)
		md.Subtasks = append(md.Subtasks, st)
	}
	md.CompletionTimestamp = time.Now().UnixMilli()
	_, err = loc.WriteMetadata(md)
	c.check(fmt.Sprintf("write snapshot %d", id), err)
	return &Snapshot{Path: loc.Dir(), ID: id}
}

// load reads the snapshot path names (none when empty) and checks that it
// holds state of the operator n.
func (sn *snapshotter) load(tb testing.TB, path string, n *runtime.Node) *storage.Snapshot {
	tb.Helper()
	if path == "" {
		return nil
	}
	if _, err := os.Stat(path); err != nil {
		tb.Fatalf("sluicetest: RestoreFrom(%q): %v", path, err)
	}
	snap, err := storage.LoadSnapshot(storageFS, path)
	if err != nil {
		tb.Fatalf("sluicetest: RestoreFrom(%q): %v", path, err)
	}
	var uids []string
	for _, st := range snap.Metadata.Subtasks {
		if st.OperatorUID == n.UID {
			return snap
		}
		if !slices.Contains(uids, st.OperatorUID) {
			uids = append(uids, st.OperatorUID)
		}
	}
	tb.Fatalf("sluicetest: RestoreFrom(%q): the snapshot holds no state of operator uid %q (it holds %s): give the operator the uid it has in the job (sluice.UID)",
		path, n.UID, quoteAll(uids))
	return nil
}

func quoteAll(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
