package s3

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/config"
)

// The s3.* keys, Flink's names: ConfigFrom reads them, Config.Set takes
// them one by one.
var configKeys = config.Fields[Config]{
	config.Field(config.String("s3.endpoint", "The S3 endpoint, for S3-compatible servers.").
		DefaultText("$AWS_ENDPOINT_URL_S3, else $AWS_ENDPOINT_URL, else AWS"), func(c *Config, v string) { c.Endpoint = v }),
	config.Field(config.Bool("s3.path.style.access", "Path-style access: the bucket in the path, not the host name.").
		DefaultText("true when the endpoint is overridden"), func(c *Config, v bool) { c.PathStyle = &v }),
	config.Field(config.String("s3.access-key", "The access key, instead of the AWS credential chain.").DeprecatedKeys("s3.access.key"),
		func(c *Config, v string) { c.AccessKeyID = v }),
	config.Field(config.String("s3.secret-key", "The secret key, with s3.access-key.").Sensitive().DeprecatedKeys("s3.secret.key"),
		func(c *Config, v string) { c.SecretAccessKey = v }),
	config.Field(config.String("s3.region", "The region.").DefaultText("$AWS_REGION, the profile's, else us-east-1"),
		func(c *Config, v string) { c.Region = v }),
	config.Field(config.MemorySize("s3.upload.part.size", "The part size of multipart uploads (at least 5mb).").Default(DefaultPartSize),
		func(c *Config, v int64) { c.PartSize = v }),
	config.Field(config.Int("s3.max-attempts", "Attempts per request, with exponential backoff.").Default(DefaultMaxAttempts),
		func(c *Config, v int) { c.MaxAttempts = v }),
	config.Field(config.Duration("s3.request.timeout", "The wait for an answer's headers; a request that takes longer is retried.").
		Default(DefaultRequestTimeout), func(c *Config, v time.Duration) { c.RequestTimeout = v }),
	config.Field(config.String("s3.entropy.key", "A marker in checkpoint paths that data files replace with characters derived from their key."),
		func(c *Config, v string) { c.EntropyKey = v }),
	config.Field(config.Int("s3.entropy.length", "The characters that replace s3.entropy.key.").Default(DefaultEntropyLength),
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

// ConfigFrom returns the Config of conf's s3.* keys, and whether it sets
// any; the error names every key whose value it refuses.
func ConfigFrom(conf *config.Configuration) (c Config, set bool, err error) {
	set, err = configKeys.Configure(&c, conf)
	return c, set, err
}

// Set applies an option by its Flink name (or a deprecated one):
// s3.endpoint, s3.path.style.access, s3.access-key, s3.secret-key,
// s3.region, s3.upload.part.size (bytes, or with a unit: 16mb),
// s3.max-attempts, s3.request.timeout ("30 s", "500 ms"), s3.entropy.key,
// s3.entropy.length.
func (c *Config) Set(key, value string) error {
	if err := configKeys.Set(c, key, value); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}
