package s3

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/checkpoint/storage/storagetest"
	"github.com/sluicehq/sluice/internal/testutil"
)

func testLocation(t testing.TB) string { return testutil.S3Location(t) }

func newTestBackend(t testing.TB, loc string, c Config) *Backend {
	t.Helper()
	b, err := New(context.Background(), loc, c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestContract(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Backend {
		return newTestBackend(t, testLocation(t), Config{PartSize: MinPartSize})
	})
}

func TestContractWithEntropy(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Backend {
		loc := testLocation(t)
		return newTestBackend(t, loc+"/_entropy_/jobs", Config{PartSize: MinPartSize, EntropyKey: "_entropy_"})
	})
}

// The storage suite (commit, recovery, discard, garbage collection) on S3,
// as on POSIX.
func TestStorageSuite(t *testing.T) {
	storagetest.RunStorage(t, func(t *testing.T) storage.Backend {
		return newTestBackend(t, testLocation(t)+"/job-1", Config{})
	})
}

// A streamed object larger than the part size is a multipart upload; it
// reads back whole, and an aborted one leaves nothing, not even an
// unfinished upload.
func TestMultipartUpload(t *testing.T) {
	ctx := t.Context()
	b := newTestBackend(t, testLocation(t), Config{PartSize: MinPartSize})
	data := make([]byte, 2*MinPartSize+12345)
	_, _ = rand.Read(data)
	w, err := b.Create(ctx, "shared/big")
	if err != nil {
		t.Fatal(err)
	}
	for p := data; len(p) > 0; {
		n := min(len(p), 1<<20+7)
		if _, err := w.Write(p[:n]); err != nil {
			t.Fatal(err)
		}
		p = p[n:]
	}
	if _, err := b.Stat(ctx, "shared/big"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("before Commit, Stat = %v, want not exist", err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if w.(*writer).uploadID == "" {
		t.Fatal("an object of three parts was not uploaded in parts")
	}
	o, err := b.Get(ctx, "shared/big")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(o)
	o.Close()
	if err != nil || !bytes.Equal(got, data) || o.Size() != int64(len(data)) {
		t.Fatalf("read back %d bytes (size %d), err %v; want %d equal bytes", len(got), o.Size(), err, len(data))
	}

	w, err = b.Create(ctx, "shared/torn")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	id := w.(*writer).uploadID
	w.Abort()
	if _, err := b.Stat(ctx, "shared/torn"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("aborted upload: Stat = %v, want not exist", err)
	}
	uploads, err := b.client.ListMultipartUploads(ctx, listUploadsInput(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range uploads.Uploads {
		if *u.UploadId == id {
			t.Fatalf("aborted upload %s is still listed", id)
		}
	}

	// A process killed mid-upload leaves an incomplete upload; the next
	// start aborts it.
	w, err = b.Create(ctx, "chk-9/op-0-x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	other := newTestBackend(t, testLocation(t), Config{PartSize: MinPartSize})
	ow, err := other.Create(ctx, "shared/not-ours")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ow.Write(data); err != nil {
		t.Fatal(err)
	}
	defer ow.Abort()
	n, err := b.AbortIncompleteUploads(ctx, "")
	if err != nil || n != 1 {
		t.Fatalf("AbortIncompleteUploads = %d, %v; want the one upload under the backend's root", n, err)
	}
	uploads, err = b.client.ListMultipartUploads(ctx, listUploadsInput(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range uploads.Uploads {
		if *u.UploadId == w.(*writer).uploadID {
			t.Fatalf("upload %s of %s is still listed", *u.UploadId, *u.Key)
		}
	}
	if !slices.ContainsFunc(uploads.Uploads, func(u types.MultipartUpload) bool { return *u.UploadId == ow.(*writer).uploadID }) {
		t.Fatal("the upload under another prefix was aborted too")
	}
}

// PutIfAbsent refuses to replace, and an error names the bucket, the key
// and S3's code.
func TestErrorsNameBucketKeyAndCode(t *testing.T) {
	ctx := t.Context()
	loc := testLocation(t)
	b := newTestBackend(t, loc, Config{})
	if err := b.PutIfAbsent(ctx, "chk-1/_metadata", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, "chk-1/_metadata", []byte("two")); !errors.Is(err, storage.ErrObjectExists) {
		t.Fatalf("second PutIfAbsent = %v, want ErrObjectExists", err)
	}
	// The same bytes again: an attempt whose answer was lost, retried.
	if err := b.PutIfAbsent(ctx, "chk-1/_metadata", []byte("one")); err != nil {
		t.Fatalf("PutIfAbsent of the bytes already there = %v, want nil", err)
	}
	_, err := b.Get(ctx, "chk-2/_metadata")
	var se *Error
	if !errors.As(err, &se) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Get of a missing key = %v, want an *Error matching fs.ErrNotExist", err)
	}
	if se.Code != "NoSuchKey" || se.Status != 404 || !strings.Contains(err.Error(), loc[len("s3://"):]+"/chk-2/_metadata") {
		t.Fatalf("error %q: code %q status %d; want NoSuchKey, 404 and the object's bucket and key", err, se.Code, se.Status)
	}
	nb := newTestBackend(t, "s3://sluice-no-such-bucket-x/p", Config{MaxAttempts: 1})
	err = nb.Put(ctx, "k", []byte("x"))
	if !errors.As(err, &se) || se.Code != "NoSuchBucket" || !strings.Contains(err.Error(), "s3://sluice-no-such-bucket-x/p/k") {
		t.Fatalf("put to a missing bucket = %v, want NoSuchBucket naming s3://sluice-no-such-bucket-x/p/k", err)
	}
}

// With entropy, data files go under the entropy prefix and _metadata
// without it; the bucket's listing shows both where they belong.
func TestEntropyLayout(t *testing.T) {
	ctx := t.Context()
	loc := testLocation(t)
	b := newTestBackend(t, loc+"/_entropy_/jobs/j1", Config{EntropyKey: "_entropy_", EntropyLength: 4})
	plain := newTestBackend(t, loc, Config{})
	for _, k := range []string{"chk-3/_metadata", "chk-3/op-0", "shared/a", "shared/b", "job-result"} {
		if err := b.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	var raw []string
	for o, err := range plain.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, o.Key)
	}
	slices.Sort(raw)
	want := map[string]bool{"jobs/j1/chk-3/_metadata": true, "jobs/j1/job-result": true}
	entropic := 0
	for _, k := range raw {
		if want[k] {
			delete(want, k)
			continue
		}
		e, rest, _ := strings.Cut(k, "/")
		if len(e) != 4 || !strings.HasPrefix(rest, "jobs/j1/") {
			t.Fatalf("object %q: want <4 entropy chars>/jobs/j1/<key>", k)
		}
		entropic++
	}
	if len(want) != 0 || entropic != 3 {
		t.Fatalf("bucket holds %v: missing plain objects %v, %d entropy objects (want 3)", raw, want, entropic)
	}
	for _, p := range []string{"", "chk-", "chk-3/", "shared/"} {
		var keys []string
		for o, err := range b.List(ctx, p) {
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, o.Key)
		}
		slices.Sort(keys)
		var exp []string
		for _, k := range []string{"chk-3/_metadata", "chk-3/op-0", "job-result", "shared/a", "shared/b"} {
			if strings.HasPrefix(k, p) {
				exp = append(exp, k)
			}
		}
		if !slices.Equal(keys, exp) {
			t.Fatalf("List(%q) = %v, want %v", p, keys, exp)
		}
	}
}

func listUploadsInput(b *Backend) *s3.ListMultipartUploadsInput {
	return &s3.ListMultipartUploadsInput{Bucket: &b.bucket}
}
