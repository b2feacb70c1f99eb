package storage

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/config"
)

// OpenFunc opens the backend rooted at location, a URL of the scheme it is
// registered for (s3://bucket/prefix).
type OpenFunc func(ctx context.Context, location string) (Backend, error)

// ErrUnknownScheme: a location's URL scheme has no backend registered.
var ErrUnknownScheme = errors.New("no checkpoint storage for this URL scheme")

var schemes = struct {
	sync.RWMutex
	m map[string]OpenFunc
}{m: map[string]OpenFunc{}}

// RegisterScheme makes Open serve locations of scheme with open. The S3
// backend registers s3, s3a and s3p when its package is imported.
func RegisterScheme(scheme string, open OpenFunc) {
	schemes.Lock()
	defer schemes.Unlock()
	schemes.m[strings.ToLower(scheme)] = open
}

// SchemeConfig makes the openers of a backend's schemes from its keys in
// a configuration; none (nil) when the configuration sets none of them.
type SchemeConfig func(c *config.Configuration) (map[string]OpenFunc, error)

var schemeConfigs struct {
	sync.RWMutex
	list []SchemeConfig
}

// RegisterSchemeConfig makes ConfiguredSchemes ask f: a backend whose
// keys configure how its locations are reached (the S3 backend's s3.*)
// registers it when its package is imported.
func RegisterSchemeConfig(f SchemeConfig) {
	schemeConfigs.Lock()
	defer schemeConfigs.Unlock()
	schemeConfigs.list = append(schemeConfigs.list, f)
}

// ConfiguredSchemes returns the openers the configuration's keys make,
// by scheme, for a job's Options.Schemes; nil when it sets no backend's
// keys.
func ConfiguredSchemes(c *config.Configuration) (map[string]OpenFunc, error) {
	schemeConfigs.RLock()
	list := slices.Clone(schemeConfigs.list)
	schemeConfigs.RUnlock()
	var out map[string]OpenFunc
	var errs []error
	for _, f := range list {
		m, err := f(c)
		errs = append(errs, err)
		for s, open := range m {
			if out == nil {
				out = map[string]OpenFunc{}
			}
			out[s] = open
		}
	}
	return out, errors.Join(errs...)
}

// Schemes lists the registered URL schemes, sorted.
func Schemes() []string {
	schemes.RLock()
	defer schemes.RUnlock()
	var out []string
	for s := range schemes.m {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// IsURL reports whether location is a URL (scheme://...) rather than a
// file path. file:// URLs are file paths.
func IsURL(location string) bool {
	scheme, _, ok := strings.Cut(location, "://")
	return ok && scheme != "" && !strings.ContainsAny(scheme, "/\\") && !strings.EqualFold(scheme, "file")
}

// FilePath returns the file path of a plain path or a file:// URL.
func FilePath(location string) string {
	if p, ok := strings.CutPrefix(location, "file://"); ok {
		if u, err := url.PathUnescape(p); err == nil {
			return u
		}
		return p
	}
	return location
}

// Open opens the backend rooted at location: the POSIX backend on fsys
// for a file path or a file:// URL, the backend registered for the
// scheme of any other URL (overrides, when not nil, come first).
func Open(ctx context.Context, fsys FS, location string, overrides map[string]OpenFunc) (Backend, error) {
	if !IsURL(location) {
		if fsys == nil {
			fsys = OSFS{}
		}
		return NewPOSIX(fsys, FilePath(location)), nil
	}
	scheme, _, _ := strings.Cut(location, "://")
	scheme = strings.ToLower(scheme)
	open := overrides[scheme]
	if open == nil {
		schemes.RLock()
		open = schemes.m[scheme]
		schemes.RUnlock()
	}
	if open == nil {
		hint := ""
		if scheme == "s3" || scheme == "s3a" || scheme == "s3p" {
			hint = "; the S3 backend serves it once the program imports github.com/sluicehq/sluice/checkpoint/storage/s3"
		}
		return nil, fmt.Errorf("checkpoint storage %s: %w %q (registered: file paths, %s%s)", location, ErrUnknownScheme, scheme,
			strings.Join(Schemes(), ", "), hint)
	}
	b, err := open(ctx, location)
	if err != nil {
		return nil, fmt.Errorf("checkpoint storage %s: %w", location, err)
	}
	return b, nil
}

// DirLister is implemented by backends that list the directories under a
// prefix without listing their objects (S3: a delimited listing). Recovery
// uses it to find chk-*/ without reading every checkpoint's files.
type DirLister interface {
	// ListDirs yields the directories directly under prefix ("" or a key
	// prefix ending in "/") whose names start with start, as keys ending
	// in "/".
	ListDirs(ctx context.Context, prefix, start string) iter.Seq2[string, error]
}

// UploadAborter is implemented by backends on which a streamed object cut
// short by a crash can linger as an incomplete upload (S3's multipart
// uploads): storage without an object.
type UploadAborter interface {
	// AbortIncompleteUploads aborts every incomplete upload under prefix
	// and returns how many it aborted.
	AbortIncompleteUploads(ctx context.Context, prefix string) (int, error)
}

// AbortIncompleteUploads aborts the job's incomplete uploads (on a backend
// that has them; 0 otherwise): those of a process that died mid-upload.
// Call it only while no checkpoint of the job is being written: at
// start-up, with CollectSharedGarbage.
func (s *Storage) AbortIncompleteUploads() (int, error) {
	a, ok := s.b.(UploadAborter)
	if !ok {
		return 0, nil
	}
	n, err := a.AbortIncompleteUploads(s.ctx(), "")
	if err != nil {
		return n, fmt.Errorf("checkpoint storage %s: abort incomplete uploads: %w", s.JobDir(), err)
	}
	return n, nil
}
