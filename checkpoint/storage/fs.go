package storage

import (
	"io"
	"io/fs"
	"os"
)

// FS is the file system the POSIX backend works through. OSFS is the real
// one; tests wrap it to inject failures (package faultfs). Optional
// capabilities: Linker (put-if-absent by link(2)) and Locker (the job's
// lock).
type FS interface {
	// Create creates a new file for writing; it fails if name exists.
	Create(name string) (File, error)
	// Open opens a file for reading.
	Open(name string) (File, error)
	Rename(oldname, newname string) error
	Remove(name string) error
	RemoveAll(name string) error
	MkdirAll(name string, perm fs.FileMode) error
	ReadDir(name string) ([]fs.DirEntry, error)
	Stat(name string) (fs.FileInfo, error)
	// SyncDir makes the entries of directory name durable.
	SyncDir(name string) error
}

// File is an open file of an FS.
type File interface {
	io.Reader
	io.Writer
	io.Closer
	Sync() error
}

// OSFS is the operating system's file system.
type OSFS struct{}

var _ FS = OSFS{}

func (OSFS) Create(name string) (File, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
}
func (OSFS) Open(name string) (File, error)               { return os.Open(name) }
func (OSFS) Rename(oldname, newname string) error         { return os.Rename(oldname, newname) }
func (OSFS) Remove(name string) error                     { return os.Remove(name) }
func (OSFS) RemoveAll(name string) error                  { return os.RemoveAll(name) }
func (OSFS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }
func (OSFS) ReadDir(name string) ([]fs.DirEntry, error)   { return os.ReadDir(name) }
func (OSFS) Stat(name string) (fs.FileInfo, error)        { return os.Stat(name) }

// Link makes newname a second name of oldname; it fails when newname
// exists (link(2)), which is what makes a put-if-absent atomic.
func (OSFS) Link(oldname, newname string) error { return os.Link(oldname, newname) }

func (OSFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
