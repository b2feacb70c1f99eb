package s3

import (
	"context"

	"github.com/sluicehq/sluice/checkpoint/storage"
)

func init() {
	open := Opener(Config{})
	for _, s := range Schemes {
		storage.RegisterScheme(s, open)
	}
}

// Opener returns the storage.OpenFunc that opens s3:// locations with c:
// pass it in storage.Options.Schemes (sluice.WithCheckpointSchemes(SchemeOpeners(c)) does) for
// a job whose S3 settings are not the environment's.
func Opener(c Config) storage.OpenFunc {
	return func(ctx context.Context, location string) (storage.Backend, error) {
		return New(ctx, location, c)
	}
}

// SchemeOpeners returns Opener(c) for each of Schemes.
func SchemeOpeners(c Config) map[string]storage.OpenFunc {
	m := map[string]storage.OpenFunc{}
	for _, s := range Schemes {
		m[s] = Opener(c)
	}
	return m
}
