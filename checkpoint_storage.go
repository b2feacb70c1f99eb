package sluice

import (
	"fmt"

	"github.com/sluicehq/sluice/checkpoint/storage"
)

// WithCheckpointSchemes sets how locations of the given URL schemes
// (checkpoint and savepoint directories, restore paths) are opened for
// this job, over the backends the storage packages the program imports
// registered for them (storage.RegisterScheme). Package
// checkpoint/storage/s3 serves s3://, s3a:// and s3p:// with the
// environment's settings (the AWS chain, AWS_ENDPOINT_URL_S3, ...) once
// imported, with the s3.* keys of a configuration, or with this job's own:
//
//	sluice.WithCheckpointing(10*time.Second, "s3://bucket/checkpoints"),
//	sluice.WithCheckpointSchemes(s3.SchemeOpeners(s3.Config{Endpoint: "http://127.0.0.1:7070"})),
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
