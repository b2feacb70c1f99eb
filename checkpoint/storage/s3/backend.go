package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sluicehq/sluice/checkpoint/storage"
)

// Backend is storage.Backend on a bucket and key prefix of an S3 (or
// S3-compatible) object store.
//
//   - Put is one PUT; PutIfAbsent is a PUT with If-None-Match: *, the
//     commit of a checkpoint's _metadata: the store refuses it when the
//     object exists (412), so a checkpoint is complete exactly when its
//     _metadata exists and is never replaced.
//   - Create buffers up to the part size and then uploads in parts
//     (multipart upload); nothing is visible until Commit completes the
//     upload, Abort aborts it. A smaller object is one PUT on Commit.
//   - List is ListObjectsV2 by prefix, DeleteBatch DeleteObjects in
//     batches of 1000.
//   - Every request is retried with exponential backoff and jitter on 5xx
//     answers, throttling and timeouts, up to MaxAttempts; errors then name
//     the object's URL, the operation and S3's error code.
type Backend struct {
	client *s3.Client
	bucket string
	loc    Location
	keys   keyMap
	part   int64
	log    *slog.Logger
}

var (
	_ storage.Backend       = (*Backend)(nil)
	_ storage.DirLister     = (*Backend)(nil)
	_ storage.UploadAborter = (*Backend)(nil)
)

// New returns the backend rooted at location (s3://bucket/prefix). It
// makes no request: a wrong bucket or credentials show at the first.
func New(ctx context.Context, location string, c Config) (*Backend, error) {
	loc, err := ParseLocation(location)
	if err != nil {
		return nil, err
	}
	c, err = c.withDefaults()
	if err != nil {
		return nil, err
	}
	client, err := newClient(ctx, c)
	if err != nil {
		return nil, err
	}
	return &Backend{
		client: client,
		bucket: loc.Bucket,
		loc:    loc,
		keys:   newKeyMap(loc.Prefix, c.EntropyKey, c.EntropyLength),
		part:   c.PartSize,
		log:    slog.Default(),
	}, nil
}

// Location is where the backend is rooted.
func (b *Backend) Location() Location { return b.loc }

// Path is the s3:// URL of the object of key (with its entropy); of a
// prefix ("" for the root, "chk-7/") without its trailing slash.
func (b *Backend) Path(key string) string {
	return strings.TrimSuffix("s3://"+b.bucket+"/"+b.keys.object(key), "/")
}

func (b *Backend) check(ctx context.Context, key string) (string, error) {
	if err := storage.ValidKey(key); err != nil {
		return "", err
	}
	if strings.HasSuffix(key, "/") {
		return "", fmt.Errorf("%w: %q names a directory, not an object", storage.ErrInvalidKey, key)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("%s: %w", b.Path(key), err)
	}
	return b.keys.object(key), nil
}

// Put stores data under key with one PUT.
func (b *Backend) Put(ctx context.Context, key string, data []byte) error {
	obj, err := b.check(ctx, key)
	if err != nil {
		return err
	}
	_, err = b.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        &b.bucket,
		Key:           &obj,
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		ContentMD5:    contentMD5(data),
	})
	return b.wrap("put", obj, err)
}

// PutIfAbsent stores data under key unless an object is there: a PUT with
// If-None-Match: *. When the store refuses it because an object exists,
// that object is read back: if it holds exactly data, it is this call's
// own (an attempt whose answer was lost, retried) and PutIfAbsent
// succeeds; otherwise it fails with storage.ErrObjectExists.
func (b *Backend) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	obj, err := b.check(ctx, key)
	if err != nil {
		return err
	}
	_, err = b.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        &b.bucket,
		Key:           &obj,
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		ContentMD5:    contentMD5(data),
		IfNoneMatch:   aws.String("*"),
	})
	if err == nil {
		return nil
	}
	if code(err) != "PreconditionFailed" && status(err) != 412 {
		return b.wrap("put if absent", obj, err)
	}
	if same, rerr := b.holds(ctx, key, data); rerr == nil && same {
		return nil
	}
	return fmt.Errorf("%s: %w", b.Path(key), storage.ErrObjectExists)
}

// holds reports whether the object at key holds exactly data.
func (b *Backend) holds(ctx context.Context, key string, data []byte) (bool, error) {
	o, err := b.Get(ctx, key)
	if err != nil {
		return false, err
	}
	defer o.Close()
	if o.Size() != int64(len(data)) {
		return false, nil
	}
	got, err := io.ReadAll(o)
	return err == nil && bytes.Equal(got, data), err
}

// Get opens the object at key.
func (b *Backend) Get(ctx context.Context, key string) (storage.Object, error) {
	obj, err := b.check(ctx, key)
	if err != nil {
		return nil, err
	}
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: &obj})
	if err != nil {
		return nil, b.wrap("get", obj, err)
	}
	return &object{ReadCloser: out.Body, size: aws.ToInt64(out.ContentLength), b: b, obj: obj}, nil
}

type object struct {
	io.ReadCloser
	size int64
	b    *Backend
	obj  string
}

func (o *object) Size() int64 { return o.size }

func (o *object) Read(p []byte) (int, error) {
	n, err := o.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = o.b.wrap("read", o.obj, err)
	}
	return n, err
}

// Stat returns the size of the object at key (a HEAD).
func (b *Backend) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	obj, err := b.check(ctx, key)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	out, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b.bucket, Key: &obj})
	if err != nil {
		return storage.ObjectInfo{}, b.wrap("head", obj, err)
	}
	return storage.ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength)}, nil
}

// List yields the objects under prefix, page by page (ListObjectsV2).
func (b *Backend) List(ctx context.Context, prefix string) iter.Seq2[storage.ObjectInfo, error] {
	return func(yield func(storage.ObjectInfo, error) bool) {
		if prefix != "" {
			if err := storage.ValidKey(prefix); err != nil && !strings.HasSuffix(prefix, "-") {
				// A string prefix ("chk-") need not be a valid key; a
				// path-shaped one must.
				if strings.Contains(prefix, "..") || strings.HasPrefix(prefix, "/") {
					yield(storage.ObjectInfo{}, err)
					return
				}
			}
		}
		for i, lp := range b.keys.listPrefixes(prefix) {
			p := s3.NewListObjectsV2Paginator(b.client, &s3.ListObjectsV2Input{Bucket: &b.bucket, Prefix: aws.String(lp)})
			for p.HasMorePages() {
				page, err := p.NextPage(ctx)
				if err != nil {
					yield(storage.ObjectInfo{}, b.wrap("list", lp, err))
					return
				}
				for _, o := range page.Contents {
					k, ok := b.keys.keyOf(aws.ToString(o.Key), i, prefix)
					if !ok || k == "" {
						continue
					}
					if !yield(storage.ObjectInfo{Key: k, Size: aws.ToInt64(o.Size)}, nil) {
						return
					}
				}
			}
		}
	}
}

// ListDirs yields the directories directly under prefix (a key prefix
// ending in "/", or "" for the root) whose names start with start: the
// common prefixes of a delimited listing, each as a key ending in "/".
// With entropy it sees the directories that hold a plain object (a
// _metadata), which are the completed checkpoints.
func (b *Backend) ListDirs(ctx context.Context, prefix, start string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		lp := b.keys.plain + prefix + start
		p := s3.NewListObjectsV2Paginator(b.client, &s3.ListObjectsV2Input{Bucket: &b.bucket, Prefix: aws.String(lp), Delimiter: aws.String("/")})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				yield("", b.wrap("list", lp, err))
				return
			}
			for _, cp := range page.CommonPrefixes {
				k := strings.TrimPrefix(aws.ToString(cp.Prefix), b.keys.plain)
				if !yield(k, nil) {
					return
				}
			}
		}
	}
}

// maxDeleteBatch is S3's limit of keys per DeleteObjects.
const maxDeleteBatch = 1000

// DeleteBatch deletes keys with DeleteObjects, 1000 at a time.
func (b *Backend) DeleteBatch(ctx context.Context, keys []string) error {
	var failed []storage.KeyError
	objs := make(map[string]string, len(keys))
	var ids []types.ObjectIdentifier
	for _, k := range keys {
		if err := storage.ValidKey(k); err != nil {
			failed = append(failed, storage.KeyError{Key: k, Err: err})
			continue
		}
		obj := b.keys.object(k)
		if strings.HasSuffix(k, "/") {
			obj = b.keys.plain + k
		}
		if _, dup := objs[obj]; dup {
			continue
		}
		objs[obj] = k
		ids = append(ids, types.ObjectIdentifier{Key: aws.String(obj)})
	}
	for len(ids) > 0 {
		n := min(len(ids), maxDeleteBatch)
		batch := ids[:n]
		ids = ids[n:]
		out, err := b.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: &b.bucket,
			Delete: &types.Delete{Objects: batch, Quiet: aws.Bool(true)},
		})
		if err != nil {
			werr := b.wrap("delete", aws.ToString(batch[0].Key), err)
			for _, id := range batch {
				failed = append(failed, storage.KeyError{Key: objs[aws.ToString(id.Key)], Err: werr})
			}
			continue
		}
		for _, e := range out.Errors {
			if aws.ToString(e.Code) == "NoSuchKey" {
				continue
			}
			obj := aws.ToString(e.Key)
			failed = append(failed, storage.KeyError{Key: objs[obj], Err: &Error{
				Op: "delete", Bucket: b.bucket, Key: obj, Code: aws.ToString(e.Code), Err: errors.New(aws.ToString(e.Message)),
			}})
		}
	}
	if len(failed) > 0 {
		return &storage.DeleteError{Failed: failed}
	}
	return nil
}

// wrap turns an SDK error into an *Error naming the object; a missing
// object wraps fs.ErrNotExist.
func (b *Backend) wrap(op, obj string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Op: op, Bucket: b.bucket, Key: obj, Code: code(err), Status: status(err), Err: err}
}

// contentMD5 is the Content-MD5 header of data. Every PUT and part carries
// one, whatever the SDK signs: a store then refuses a body cut short
// rather than keeping what arrived (versitygw keeps a torn unsigned PUT).
func contentMD5(data []byte) *string {
	sum := md5.Sum(data)
	return aws.String(base64.StdEncoding.EncodeToString(sum[:]))
}
