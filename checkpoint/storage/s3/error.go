package s3

import (
	"errors"
	"fmt"
	"io/fs"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// Error is a failed S3 request, after its retries: the operation, the
// object (bucket and key) and what S3 answered. A missing object or
// bucket matches fs.ErrNotExist (errors.Is).
type Error struct {
	Op     string // put, put if absent, get, head, list, delete, upload part, ...
	Bucket string
	Key    string
	// Code is S3's error code (NoSuchKey, SlowDown, AccessDenied, ...),
	// empty when no answer came (a timeout, a refused connection).
	Code string
	// Status is the HTTP status, 0 when no answer came.
	Status int
	Err    error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("s3 %s s3://%s/%s", e.Op, e.Bucket, e.Key)
	switch {
	case e.Code != "" && e.Status != 0:
		s += fmt.Sprintf(": %s (HTTP %d)", e.Code, e.Status)
	case e.Code != "":
		s += ": " + e.Code
	case e.Status != 0:
		s += fmt.Sprintf(": HTTP %d", e.Status)
	}
	return s + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes a missing object or bucket match fs.ErrNotExist.
func (e *Error) Is(target error) bool {
	if target != fs.ErrNotExist {
		return false
	}
	switch e.Code {
	case "NoSuchKey", "NotFound", "NoSuchBucket", "NoSuchUpload":
		return true
	}
	return e.Status == 404
}

// code is the S3 error code of err, "" when there is none.
func code(err error) string {
	var nk *types.NoSuchKey
	if errors.As(err, &nk) {
		return "NoSuchKey"
	}
	var nf *types.NotFound
	if errors.As(err, &nf) {
		return "NotFound"
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// status is the HTTP status of err's answer, 0 when there was none.
func status(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}
