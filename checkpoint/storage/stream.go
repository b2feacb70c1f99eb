package storage

import (
	"bufio"
	"fmt"
	"hash"
	"hash/crc32"
	"path/filepath"
)

// StateStream is a stream of state bytes written in the asynchronous part
// of a snapshot. Write to it, then Close to get its handle, or Abort. A
// stream no longer than the storage's inline threshold never touches the
// disk: its bytes go inline into _metadata. Not safe for concurrent use.
type StateStream struct {
	fs     FS
	dir    string
	name   string
	shared bool
	inline int // bytes kept in memory before a file is created; -1: always a file

	buf  []byte // until a file exists
	file File
	w    *bufio.Writer
	crc  hash.Hash32
	size int64
	err  error
	done bool
}

const streamBufferSize = 64 << 10

// Path is where the stream's file is (or would be).
func (s *StateStream) Path() string { return filepath.Join(s.dir, s.name) }

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
	if s.file == nil && len(s.buf)+len(p) <= s.inline {
		s.buf = append(s.buf, p...)
		s.crc.Write(p)
		s.size += int64(len(p))
		return len(p), nil
	}
	if s.file == nil {
		if err := s.open(); err != nil {
			return 0, err
		}
	}
	n, err := s.w.Write(p)
	s.crc.Write(p[:n])
	s.size += int64(n)
	if err != nil {
		s.err = fmt.Errorf("write state file %s: %w", s.Path(), err)
		return n, s.err
	}
	return n, nil
}

func (s *StateStream) open() error {
	f, err := s.fs.Create(s.Path())
	if err != nil {
		s.err = fmt.Errorf("create state file %s: %w", s.Path(), err)
		return s.err
	}
	s.file = f
	s.w = bufio.NewWriterSize(f, streamBufferSize)
	if len(s.buf) > 0 {
		if _, err := s.w.Write(s.buf); err != nil {
			s.err = fmt.Errorf("write state file %s: %w", s.Path(), err)
			return s.err
		}
	}
	s.buf = nil
	return nil
}

// Close finishes the stream: flush, fsync and close its file (or keep it
// inline) and return its handle. On failure the file is removed and the
// error names it.
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
	if s.file == nil && s.inline >= 0 && int(s.size) <= s.inline {
		return StateHandle{Size: s.size, CRC32C: sum, Inline: append([]byte{}, s.buf...)}, nil
	}
	if s.file == nil {
		if err := s.open(); err != nil {
			s.done = false
			s.Abort()
			return StateHandle{}, err
		}
	}
	err := s.w.Flush()
	if err == nil {
		err = s.file.Sync()
	}
	if cerr := s.file.Close(); err == nil {
		err = cerr
	}
	s.file = nil
	if err != nil {
		_ = s.fs.Remove(s.Path())
		return StateHandle{}, fmt.Errorf("close state file %s: %w", s.Path(), err)
	}
	return StateHandle{Path: s.name, Shared: s.shared, Size: s.size, CRC32C: sum}, nil
}

// Abort discards the stream and removes its file, if any.
func (s *StateStream) Abort() {
	if s.done && s.file == nil {
		return
	}
	s.done = true
	if s.file != nil {
		_ = s.file.Close()
		_ = s.fs.Remove(s.Path())
		s.file = nil
	}
	s.buf = nil
}

// Checksum is the CRC32C that state handles record, for bytes kept inline.
func Checksum(data []byte) uint32 { return crc32.Checksum(data, castagnoli) }
