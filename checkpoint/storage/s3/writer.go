package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sluicehq/sluice/checkpoint/storage"
)

// Create starts a streamed object. Up to the part size it is buffered and
// stored with one PUT on Commit; beyond, it becomes a multipart upload
// whose parts are sent as they fill (one part in memory at a time), and
// Commit completes it. Until then nothing is visible under key; Abort (or
// a failed Commit) aborts the upload, so a torn upload leaves no object.
func (b *Backend) Create(ctx context.Context, key string) (storage.ObjectWriter, error) {
	obj, err := b.check(ctx, key)
	if err != nil {
		return nil, err
	}
	return &writer{b: b, ctx: ctx, obj: obj, buf: make([]byte, 0, min(b.part, 1<<20))}, nil
}

type writer struct {
	b        *Backend
	ctx      context.Context
	obj      string
	buf      []byte
	uploadID string // set once the object is a multipart upload
	parts    []types.CompletedPart
	err      error // sticky: the first failure
	done     bool
}

func (w *writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.done {
		return 0, fmt.Errorf("%s: write after commit or abort", w.b.Path(""))
	}
	n := 0
	for len(p) > 0 {
		room := int(w.b.part) - len(w.buf)
		c := min(room, len(p))
		w.buf = append(w.buf, p[:c]...)
		p, n = p[c:], n+c
		if len(w.buf) == int(w.b.part) {
			if err := w.flushPart(); err != nil {
				w.err = err
				return n, err
			}
		}
	}
	return n, nil
}

// flushPart uploads the buffer as the next part, starting the multipart
// upload with the first.
func (w *writer) flushPart() error {
	if w.uploadID == "" {
		out, err := w.b.client.CreateMultipartUpload(w.ctx, &s3.CreateMultipartUploadInput{Bucket: &w.b.bucket, Key: &w.obj})
		if err != nil {
			return w.b.wrap("create multipart upload", w.obj, err)
		}
		w.uploadID = aws.ToString(out.UploadId)
	}
	num := int32(len(w.parts) + 1)
	out, err := w.b.client.UploadPart(w.ctx, &s3.UploadPartInput{
		Bucket:        &w.b.bucket,
		Key:           &w.obj,
		UploadId:      &w.uploadID,
		PartNumber:    aws.Int32(num),
		Body:          bytes.NewReader(w.buf),
		ContentLength: aws.Int64(int64(len(w.buf))),
		ContentMD5:    contentMD5(w.buf),
	})
	if err != nil {
		return w.b.wrap(fmt.Sprintf("upload part %d", num), w.obj, err)
	}
	w.parts = append(w.parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
	w.buf = w.buf[:0]
	if cap(w.buf) < int(w.b.part) {
		w.buf = make([]byte, 0, w.b.part)
	}
	return nil
}

func (w *writer) Commit() error {
	if w.done {
		return fmt.Errorf("%s: commit after commit or abort", w.b.Path(""))
	}
	if w.err != nil {
		w.Abort()
		return w.err
	}
	var err error
	if w.uploadID == "" {
		_, err = w.b.client.PutObject(w.ctx, &s3.PutObjectInput{
			Bucket:        &w.b.bucket,
			Key:           &w.obj,
			Body:          bytes.NewReader(w.buf),
			ContentLength: aws.Int64(int64(len(w.buf))),
			ContentMD5:    contentMD5(w.buf),
		})
		err = w.b.wrap("put", w.obj, err)
	} else {
		if len(w.buf) > 0 {
			err = w.flushPart()
		}
		if err == nil {
			_, err = w.b.client.CompleteMultipartUpload(w.ctx, &s3.CompleteMultipartUploadInput{
				Bucket:          &w.b.bucket,
				Key:             &w.obj,
				UploadId:        &w.uploadID,
				MultipartUpload: &types.CompletedMultipartUpload{Parts: w.parts},
			})
			err = w.b.wrap("complete multipart upload", w.obj, err)
		}
	}
	if err != nil {
		w.err = err
		w.Abort()
		return err
	}
	w.done = true
	w.buf = nil
	return nil
}

func (w *writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.buf = nil
	if w.uploadID == "" {
		return
	}
	// The caller's context may be what ended the upload: the abort gets
	// one of its own, so the parts do not linger.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 30*time.Second)
	defer cancel()
	_, err := w.b.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &w.b.bucket, Key: &w.obj, UploadId: &w.uploadID})
	if err != nil && !errors.Is(err, context.Canceled) {
		w.b.log.Warn("s3: abort multipart upload failed; the bucket's lifecycle rule for incomplete uploads removes its parts",
			"object", "s3://"+w.b.bucket+"/"+w.obj, "upload", w.uploadID, "err", err)
	}
}

// AbortIncompleteUploads aborts the multipart uploads under prefix that
// were never completed: those of a process killed mid-upload, which hold
// storage (and cost) without being objects. Call it only while nothing of
// the prefix is being written (a job's start-up, holding its lock).
func (b *Backend) AbortIncompleteUploads(ctx context.Context, prefix string) (int, error) {
	n := 0
	var errs []error
	for i, lp := range b.keys.listPrefixes(prefix) {
		p := s3.NewListMultipartUploadsPaginator(b.client, &s3.ListMultipartUploadsInput{Bucket: &b.bucket, Prefix: aws.String(lp)})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return n, b.wrap("list multipart uploads", lp, err)
			}
			for _, u := range page.Uploads {
				if _, ok := b.keys.keyOf(aws.ToString(u.Key), i, prefix); !ok {
					continue
				}
				_, err := b.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &b.bucket, Key: u.Key, UploadId: u.UploadId})
				if err != nil && code(err) != "NoSuchUpload" {
					errs = append(errs, b.wrap("abort multipart upload "+aws.ToString(u.UploadId), aws.ToString(u.Key), err))
					continue
				}
				n++
			}
		}
	}
	return n, errors.Join(errs...)
}
