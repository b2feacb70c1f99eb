package filesink

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink"
)

// writer is the PrecommittingWriter of one subtask.
type writer[T any] struct {
	codec   codec.Codec[T]
	logger  *slog.Logger
	dir     string // the sink's directory
	inDir   string // <dir>/.inprogress
	subtask int
	token   string
	after   int64 // last checkpoint passed: the after of the next file
	n       int   // files begun so far

	// The open file of the current interval, nil until its first record.
	f       *os.File
	name    string // its name in inDir
	cw      checksumWriter
	bw      *bufio.Writer
	records int64

	scratch []byte
	prefix  [1 + binary.MaxVarintLen64]byte
	closed  bool
}

var _ sink.PrecommittingWriter[int] = (*writer[int])(nil)

// NewWriter makes the writer of subtask ctx.Subtask. It makes the
// directories if missing and deletes the in-progress files that the
// package's cleanup rule marks as garbage.
func (s *Sink[T]) NewWriter(ctx sink.WriterContext) (sink.Writer[T], error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	inDir := filepath.Join(s.dir, inProgressDirName)
	if err := os.MkdirAll(inDir, 0o755); err != nil {
		return nil, fmt.Errorf("file sink subtask %d: %w", ctx.Subtask, err)
	}
	var tok [8]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, fmt.Errorf("file sink subtask %d: attempt token: %w", ctx.Subtask, err)
	}
	w := &writer[T]{
		codec:   s.codec,
		logger:  s.opts.logger,
		dir:     s.dir,
		inDir:   inDir,
		subtask: ctx.Subtask,
		token:   hex.EncodeToString(tok[:]),
	}
	if ctx.Restored {
		w.after = ctx.RestoredCheckpointID
	}
	if err := w.cleanup(ctx.Parallelism); err != nil {
		return nil, err
	}
	return w, nil
}

// cleanup deletes the in-progress files that no checkpoint from which this
// attempt may restore can refer to; see the package comment.
func (w *writer[T]) cleanup(parallelism int) error {
	entries, err := os.ReadDir(w.inDir)
	if err != nil {
		return fmt.Errorf("file sink subtask %d: list %s: %w", w.subtask, w.inDir, err)
	}
	var deleted []string
	for _, e := range entries {
		sub, _, after, _, ok := parseInProgressName(e.Name())
		if !ok {
			continue // not ours: leave it
		}
		mine := sub == w.subtask || (sub >= parallelism && sub%parallelism == w.subtask)
		if !mine || after < w.after {
			continue
		}
		p := filepath.Join(w.inDir, e.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("file sink subtask %d: delete abandoned in-progress file: %w", w.subtask, err)
		}
		deleted = append(deleted, e.Name())
	}
	if len(deleted) > 0 {
		w.logger.Info("file sink deleted abandoned in-progress files",
			"dir", w.dir, "subtask", w.subtask, "restored_checkpoint", w.after, "files", deleted)
	}
	return nil
}

// inProgressName is the name of an in-progress file:
// <subtask>-<token>-<after>-<n>.
func inProgressName(subtask int, token string, after int64, n int) string {
	return strconv.Itoa(subtask) + "-" + token + "-" + strconv.FormatInt(after, 10) + "-" + strconv.Itoa(n)
}

func parseInProgressName(name string) (subtask int, token string, after int64, n int, ok bool) {
	parts := strings.Split(name, "-")
	if len(parts) != 4 || parts[1] == "" {
		return 0, "", 0, 0, false
	}
	sub, err1 := strconv.Atoi(parts[0])
	aft, err2 := strconv.ParseInt(parts[2], 10, 64)
	k, err3 := strconv.Atoi(parts[3])
	if err1 != nil || err2 != nil || err3 != nil || sub < 0 || aft < 0 || k < 0 {
		return 0, "", 0, 0, false
	}
	return sub, parts[1], aft, k, true
}

// Write appends v to the in-progress file of the current interval, which
// it begins on the interval's first record. The timestamp is not stored.
func (w *writer[T]) Write(v T, _ int64) error {
	if w.closed {
		return fmt.Errorf("file sink subtask %d: write: %w", w.subtask, sink.ErrClosed)
	}
	if w.f == nil {
		if err := w.begin(); err != nil {
			return err
		}
	}
	payload, err := w.codec.Append(w.scratch[:0], v)
	if err != nil {
		return fmt.Errorf("file sink subtask %d: encode record: %w", w.subtask, err)
	}
	w.scratch = payload
	if _, err := w.bw.Write(appendRecordPrefix(w.prefix[:0], len(payload))); err != nil {
		return w.writeErr(err)
	}
	if _, err := w.bw.Write(payload); err != nil {
		return w.writeErr(err)
	}
	w.records++
	return nil
}

func (w *writer[T]) writeErr(err error) error {
	return fmt.Errorf("file sink subtask %d: write %s: %w", w.subtask, filepath.Join(w.inDir, w.name), err)
}

func (w *writer[T]) begin() error {
	name := inProgressName(w.subtask, w.token, w.after, w.n)
	f, err := os.OpenFile(filepath.Join(w.inDir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("file sink subtask %d: begin in-progress file: %w", w.subtask, err)
	}
	w.n++
	w.f, w.name, w.records = f, name, 0
	w.cw = checksumWriter{f: f}
	if w.bw == nil {
		w.bw = bufio.NewWriterSize(&w.cw, 64<<10)
	} else {
		w.bw.Reset(&w.cw)
	}
	if _, err := w.bw.Write(appendHeader(nil)); err != nil {
		return w.writeErr(err)
	}
	return nil
}

// PrepareCommit closes the in-progress file of the interval that
// checkpoint checkpointID closes: it writes the footer, fsyncs the file and
// its directory, and returns one committable describing it. An interval
// with no records returns no committable. The next record begins a new file.
func (w *writer[T]) PrepareCommit(checkpointID int64) ([][]byte, error) {
	if w.closed {
		return nil, fmt.Errorf("file sink subtask %d: prepare commit of checkpoint %d: %w", w.subtask, checkpointID, sink.ErrClosed)
	}
	if checkpointID < 0 {
		return nil, fmt.Errorf("file sink subtask %d: prepare commit of negative checkpoint id %d", w.subtask, checkpointID)
	}
	if w.f == nil {
		w.after = checkpointID
		return nil, nil
	}
	c, err := w.finish(checkpointID)
	if err != nil {
		return nil, fmt.Errorf("file sink subtask %d: prepare commit of checkpoint %d: %w", w.subtask, checkpointID, err)
	}
	w.after = checkpointID
	b, err := c.encode()
	if err != nil {
		return nil, err
	}
	return [][]byte{b}, nil
}

// finish writes the footer of the open file, makes it durable and closes
// it, and describes it as a committable of checkpointID.
func (w *writer[T]) finish(checkpointID int64) (Committable, error) {
	f, path := w.f, filepath.Join(w.inDir, w.name)
	w.f = nil
	if err := w.bw.Flush(); err != nil {
		f.Close()
		return Committable{}, fmt.Errorf("write %s: %w", path, err)
	}
	var footer [footerLen]byte
	if _, err := w.cw.Write(appendFooter(footer[:0], uint64(w.records), w.cw.crc)); err != nil {
		f.Close()
		return Committable{}, fmt.Errorf("write footer of %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return Committable{}, fmt.Errorf("fsync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return Committable{}, fmt.Errorf("close %s: %w", path, err)
	}
	if err := syncDir(w.inDir); err != nil {
		return Committable{}, err
	}
	return Committable{
		Version:      committableVersion,
		Subtask:      w.subtask,
		CheckpointID: checkpointID,
		InProgress:   w.name,
		Final:        finalName(w.subtask, checkpointID, 0),
		Size:         w.cw.size,
		CRC32C:       w.cw.crc,
		Records:      w.records,
	}, nil
}

// Flush does nothing: with exactly-once, records become visible only
// through a commit, and PrepareCommit makes them durable.
func (w *writer[T]) Flush(bool) error {
	if w.closed {
		return fmt.Errorf("file sink subtask %d: flush: %w", w.subtask, sink.ErrClosed)
	}
	return nil
}

// Close closes and deletes the file of the current interval, which was
// never handed over; files handed over are left to the committer.
func (w *writer[T]) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if w.f == nil {
		return nil
	}
	path := filepath.Join(w.inDir, w.name)
	err := w.f.Close()
	w.f = nil
	if rerr := os.Remove(path); rerr != nil {
		err = errors.Join(err, rerr)
	}
	if err != nil {
		return fmt.Errorf("file sink subtask %d: close: %w", w.subtask, err)
	}
	return nil
}

// syncDir fsyncs a directory so that the entries made or renamed in it are
// durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
