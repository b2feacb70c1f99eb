package storage

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
)

// StateStream is a stream of state bytes written in the asynchronous part
// of a snapshot. Write to it, then Close to get its handle, or Abort. A
// stream no longer than the storage's inline threshold never touches the
// backend: its bytes go inline into _metadata. Otherwise it is one object,
// streamed (Backend.Create) and published by Close. Not safe for
// concurrent use.
type StateStream struct {
	b      Backend
	key    string
	name   string
	shared bool
	inline int // bytes kept in memory before an object is started; -1: always an object
	// deferSync: the object is made durable by the checkpoint's commit
	// (DeferredSyncer), not by its own Commit.
	deferSync bool
	// checkpoint is the id of the location's checkpoint; a shared stream
	// whose sync is deferred records it in its handle (DurableAt).
	checkpoint int64

	buf  []byte // until an object is started
	obj  ObjectWriter
	w    *bufio.Writer
	crc  hash.Hash32
	size int64
	err  error
	done bool
}

// streamBufferSize is the buffer of a stream's object, made at the
// first write smaller than streamDirectWrite; a stream written in large
// writes only (the keyed state writer's, which buffers 64 KiB itself)
// never makes one.
const streamBufferSize = 64 << 10

// streamDirectWrite is the smallest write that goes to the object
// directly while the stream has no buffer.
const streamDirectWrite = 16 << 10

func newStateStream(b Backend, prefix, name string, shared bool, inline int, checkpoint int64) *StateStream {
	_, deferSync := b.(DeferredSyncer)
	return &StateStream{b: b, key: prefix + name, name: name, shared: shared, inline: inline, deferSync: deferSync, checkpoint: checkpoint}
}

// Path is where the stream's object is (or would be), as the backend
// names it.
func (s *StateStream) Path() string { return s.b.Path(s.key) }

func (s *StateStream) Write(p []byte) (int, error) {
	if s.done {
		return 0, fmt.Errorf("write state file %s: stream closed", s.Path())
	}
	if s.err != nil {
		return 0, s.err
	}
	if s.crc == nil {
		s.crc = crc32.New(castagnoli)
	}
	if s.obj == nil && len(s.buf)+len(p) <= s.inline {
		s.buf = append(s.buf, p...)
		s.crc.Write(p)
		s.size += int64(len(p))
		return len(p), nil
	}
	if s.obj == nil {
		if err := s.open(); err != nil {
			return 0, err
		}
	}
	var n int
	var err error
	if s.w == nil && len(p) >= streamDirectWrite {
		// A large write (a state writer's own buffer, a copy's
		// chunk) goes to the object as it is: a buffer of the
		// stream's own would only copy it.
		n, err = s.obj.Write(p)
	} else {
		if s.w == nil {
			s.w = bufio.NewWriterSize(s.obj, streamBufferSize)
		}
		n, err = s.w.Write(p)
	}
	s.crc.Write(p[:n])
	s.size += int64(n)
	if err != nil {
		s.err = fmt.Errorf("write state file %s: %w", s.Path(), err)
		return n, s.err
	}
	return n, nil
}

func (s *StateStream) open() error {
	var obj ObjectWriter
	var err error
	if ds, ok := s.b.(DeferredSyncer); ok && s.deferSync {
		obj, err = ds.CreateDeferred(context.Background(), s.key)
	} else {
		obj, err = s.b.Create(context.Background(), s.key)
	}
	if err != nil {
		s.err = fmt.Errorf("create state file %s: %w", s.Path(), err)
		return s.err
	}
	s.obj = obj
	if len(s.buf) > 0 {
		if _, err := obj.Write(s.buf); err != nil {
			s.err = fmt.Errorf("write state file %s: %w", s.Path(), err)
			return s.err
		}
	}
	s.buf = nil
	return nil
}

// Close finishes the stream: flush and commit its object (or keep it
// inline) and return its handle. On failure nothing is published and the
// error names the file.
func (s *StateStream) Close() (StateHandle, error) {
	if s.done {
		return StateHandle{}, fmt.Errorf("close state file %s: stream already closed", s.Path())
	}
	if s.err != nil {
		s.Abort()
		return StateHandle{}, s.err
	}
	s.done = true
	var sum uint32
	if s.crc != nil {
		sum = s.crc.Sum32()
	}
	if s.obj == nil && s.inline >= 0 && int(s.size) <= s.inline {
		return StateHandle{Size: s.size, CRC32C: sum, Inline: append([]byte{}, s.buf...)}, nil
	}
	if s.obj == nil {
		if err := s.open(); err != nil {
			s.done = false
			s.Abort()
			return StateHandle{}, err
		}
	}
	var err error
	if s.w != nil {
		err = s.w.Flush()
	}
	if err == nil {
		err = s.obj.Commit()
	} else {
		s.obj.Abort()
	}
	s.obj = nil
	if err != nil {
		return StateHandle{}, fmt.Errorf("close state file %s: %w", s.Path(), err)
	}
	h := StateHandle{Path: s.name, Shared: s.shared, Size: s.size, CRC32C: sum}
	if s.shared && s.deferSync {
		h.DurableAt = s.checkpoint
	}
	return h, nil
}

// Abort discards the stream and its object, if any.
func (s *StateStream) Abort() {
	if s.done && s.obj == nil {
		return
	}
	s.done = true
	if s.obj != nil {
		s.obj.Abort()
		s.obj = nil
	}
	s.buf = nil
}

// StateUploader uploads the files of an incremental snapshot into a
// location (state.Uploader): private files as state streams of the
// checkpoint, shared ones into the shared directory, each named
// <owner>-<name>. A reference is the JSON of the file's StateHandle.
type StateUploader struct {
	Loc   *Location
	Owner string
}

// Upload streams size bytes of r into the location.
func (u StateUploader) Upload(name string, r io.Reader, size int64, shared bool) ([]byte, error) {
	var s *StateStream
	if shared {
		var err error
		if s, err = u.Loc.CreateSharedStream(u.Owner + "-" + name); err != nil {
			return nil, err
		}
	} else {
		s = u.Loc.CreateStateStream(u.Owner + "-" + name)
	}
	n, err := io.Copy(s, r)
	if err == nil && n != size {
		err = fmt.Errorf("upload %s: read %d bytes, want %d", name, n, size)
	}
	if err != nil {
		s.Abort()
		return nil, err
	}
	h, err := s.Close()
	if err != nil {
		return nil, err
	}
	return json.Marshal(h)
}

// UploadFile stores the local file path (name, size bytes) as Upload
// would, but a shared one as a hard link where the location can make one
// (LinkSharedFile: a POSIX location on the same file system), not a copy;
// checksum gives the file's CRC-32C once it is linked. ok is false when it
// did not (nothing was read): the caller uploads the file with Upload.
// The file must never be written again (RocksDB's SST files).
func (u StateUploader) UploadFile(name, path string, size int64, shared bool, checksum func() (uint32, error)) (ref []byte, ok bool, err error) {
	if !shared {
		return nil, false, nil
	}
	h, ok, err := u.Loc.LinkSharedFile(u.Owner+"-"+name, path, size, checksum)
	if err != nil || !ok {
		return nil, false, err
	}
	ref, err = json.Marshal(h)
	return ref, err == nil, err
}
