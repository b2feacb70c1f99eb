package s3

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/config"
)

// The s3.* keys, Flink's names: ConfigFrom reads them, Config.Set takes
// them one by one.
var configKeys = []configKey{
	field(config.String("s3.endpoint", "The S3 endpoint, for S3-compatible servers.").
		DefaultText("$AWS_ENDPOINT_URL_S3, else $AWS_ENDPOINT_URL, else AWS"), func(c *Config, v string) { c.Endpoint = v }),
	field(config.Bool("s3.path.style.access", "Path-style access: the bucket in the path, not the host name.").
		DefaultText("true when the endpoint is overridden"), func(c *Config, v bool) { c.PathStyle = &v }),
	field(config.String("s3.access-key", "The access key, instead of the AWS credential chain.").DeprecatedKeys("s3.access.key"),
		func(c *Config, v string) { c.AccessKeyID = v }),
	field(config.String("s3.secret-key", "The secret key, with s3.access-key.").Sensitive().DeprecatedKeys("s3.secret.key"),
		func(c *Config, v string) { c.SecretAccessKey = v }),
	field(config.String("s3.region", "The region.").DefaultText("$AWS_REGION, the profile's, else us-east-1"),
		func(c *Config, v string) { c.Region = v }),
	field(config.MemorySize("s3.upload.part.size", "The part size of multipart uploads (at least 5mb).").Default(DefaultPartSize),
		func(c *Config, v int64) { c.PartSize = v }),
	field(config.Int("s3.max-attempts", "Attempts per request, with exponential backoff.").Default(DefaultMaxAttempts),
		func(c *Config, v int) { c.MaxAttempts = v }),
	field(config.Duration("s3.request.timeout", "The wait for an answer's headers; a request that takes longer is retried.").
		Default(DefaultRequestTimeout), func(c *Config, v time.Duration) { c.RequestTimeout = v }),
	field(config.String("s3.entropy.key", "A marker in checkpoint paths that data files replace with characters derived from their key."),
		func(c *Config, v string) { c.EntropyKey = v }),
	field(config.Int("s3.entropy.length", "The characters that replace s3.entropy.key.").Default(DefaultEntropyLength),
		func(c *Config, v int) { c.EntropyLength = v }),
}

func init() {
	storage.RegisterSchemeConfig(func(c *config.Configuration) (map[string]storage.OpenFunc, error) {
		cfg, set, err := ConfigFrom(c)
		if err != nil || !set {
			return nil, err
		}
		return SchemeOpeners(cfg), nil
	})
}

type configKey struct {
	names     []string
	configure func(c *Config, conf *config.Configuration) (bool, error)
	set       func(c *Config, value string) error
}

func field[T any](k *config.Key[T], apply func(c *Config, v T)) configKey {
	return configKey{
		names: k.Names(),
		configure: func(c *Config, conf *config.Configuration) (bool, error) {
			v, ok, err := k.Get(conf)
			if ok && err == nil {
				apply(c, v)
			}
			return ok, err
		},
		set: func(c *Config, value string) error {
			v, err := k.Parse(value)
			if err == nil {
				apply(c, v)
			}
			return err
		},
	}
}

// ConfigFrom returns the Config of conf's s3.* keys, and whether it sets
// any; the error names every key whose value it refuses.
func ConfigFrom(conf *config.Configuration) (c Config, set bool, err error) {
	var errs []error
	for _, k := range configKeys {
		ok, err := k.configure(&c, conf)
		set = set || ok
		errs = append(errs, err)
	}
	return c, set, errors.Join(errs...)
}

// Set applies an option by its Flink name (or a deprecated one):
// s3.endpoint, s3.path.style.access, s3.access-key, s3.secret-key,
// s3.region, s3.upload.part.size (bytes, or with a unit: 16mb),
// s3.max-attempts, s3.request.timeout ("30 s", "500 ms"), s3.entropy.key,
// s3.entropy.length.
func (c *Config) Set(key, value string) error {
	for _, k := range configKeys {
		for _, n := range k.names {
			if n != key {
				continue
			}
			if err := k.set(c, value); err != nil {
				return fmt.Errorf("%w: %s=%q: %w", ErrInvalidConfig, key, value, err)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: unknown option %q", ErrInvalidConfig, key)
}
