package sluice

import (
	"fmt"

	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/checkpoint/storage/s3"
)

// S3Config configures checkpoint storage on S3 (s3.endpoint,
// s3.path.style.access, s3.upload.part.size, s3.entropy.key, ...).
type S3Config = s3.Config

// WithS3 sets how s3://, s3a:// and s3p:// checkpoint directories,
// savepoint directories and restore paths are reached. Without it they
// are reached with the environment's settings: credentials and region
// from the standard AWS chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_REGION, profiles), the endpoint from AWS_ENDPOINT_URL_S3 or
// AWS_ENDPOINT_URL, path-style access when the endpoint is overridden.
//
//	sluice.WithCheckpointing(10*time.Second, "s3://bucket/checkpoints"),
//	sluice.WithS3(sluice.S3Config{Endpoint: "http://127.0.0.1:7070"}),
func WithS3(c S3Config) Option { return WithCheckpointSchemes(s3.SchemeOpeners(c)) }

// WithCheckpointSchemes sets how locations of the given URL schemes
// (checkpoint and savepoint directories, restore paths) are opened for
// this job, over the backends the storage packages the program imports
// registered for them (storage.RegisterScheme):
//
//	sluice.WithCheckpointSchemes(s3.SchemeOpeners(s3.Config{Endpoint: "http://127.0.0.1:7070"}))
func WithCheckpointSchemes(openers map[string]storage.OpenFunc) Option {
	return func(e *Environment) {
		if e.cfg.CheckpointSchemes == nil {
			e.cfg.CheckpointSchemes = map[string]storage.OpenFunc{}
		}
		for k, v := range openers {
			e.cfg.CheckpointSchemes[k] = v
		}
	}
}

// WithStateMemoryThreshold sets the size up to which a state stream is
// kept inside the checkpoint's _metadata rather than in an object of its
// own (state.storage.fs.memory-threshold; default 20 KiB): fewer objects
// per checkpoint on object stores. 0 writes every stream to its own file.
func WithStateMemoryThreshold(bytes int) Option {
	return func(e *Environment) {
		if bytes < 0 || bytes > 1<<20 {
			e.addErr(fmt.Errorf("%w: state.storage.fs.memory-threshold %d must be between 0 and 1 MiB", ErrInvalidOption, bytes))
			return
		}
		e.cfg.InlineThreshold = &bytes
	}
}
