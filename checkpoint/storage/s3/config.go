package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Defaults, with Flink's option names where Flink has one.
const (
	// DefaultPartSize is the size of the parts of a multipart upload, and
	// the size above which a streamed object is uploaded in parts
	// (s3.upload.part.size). S3's minimum part size is 5 MiB.
	DefaultPartSize = 8 << 20
	// MinPartSize is S3's smallest part (but the last).
	MinPartSize = 5 << 20
	// DefaultMaxAttempts is how many times one request is tried
	// (s3.max-attempts): retries back off exponentially with jitter, on
	// 5xx answers, throttling and timeouts.
	DefaultMaxAttempts = 6
	// DefaultMaxBackoff caps the wait between two attempts.
	DefaultMaxBackoff = 5 * time.Second
	// DefaultRequestTimeout bounds the wait for the headers of an answer
	// (s3.request.timeout); a request that takes longer is retried.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultEntropyLength is s3.entropy.length's default.
	DefaultEntropyLength = 4
)

// Config configures the S3 backend. The zero value takes everything from
// the environment (the standard AWS chain) and the defaults above.
type Config struct {
	// Endpoint overrides the S3 endpoint (s3.endpoint), for S3-compatible
	// servers. Empty: AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else AWS.
	Endpoint string
	// PathStyle sets path-style access (s3.path.style.access): the bucket
	// in the path, not the host name. Nil: on when an endpoint is
	// overridden (as S3-compatible servers need), off for AWS.
	PathStyle *bool
	// Region; empty takes AWS_REGION or the profile's, else us-east-1.
	Region string
	// AccessKeyID and SecretAccessKey, when both are set, are used instead
	// of the credential chain (AWS_ACCESS_KEY_ID, profiles, roles).
	AccessKeyID, SecretAccessKey string
	// Profile selects a shared-config profile (AWS_PROFILE otherwise).
	Profile string
	// PartSize is the multipart part size (s3.upload.part.size),
	// DefaultPartSize when 0; at least MinPartSize.
	PartSize int64
	// MaxAttempts per request (s3.max-attempts), DefaultMaxAttempts when 0.
	MaxAttempts int
	// MaxBackoff between attempts, DefaultMaxBackoff when 0.
	MaxBackoff time.Duration
	// RequestTimeout bounds the wait for an answer's headers
	// (s3.request.timeout), DefaultRequestTimeout when 0.
	RequestTimeout time.Duration
	// EntropyKey (s3.entropy.key) is a marker in the location's path: data
	// files are written with it replaced by EntropyLength characters
	// derived from their key, spreading them over S3's key space; the
	// _metadata files and the job's own files are written with it removed,
	// so that listing and restoring address them without it.
	EntropyKey string
	// EntropyLength (s3.entropy.length), DefaultEntropyLength when 0.
	EntropyLength int
}

// ErrInvalidConfig is wrapped by every configuration error.
var ErrInvalidConfig = errors.New("invalid s3 configuration")

// withDefaults fills the zero fields and checks the others.
func (c Config) withDefaults() (Config, error) {
	if c.PartSize == 0 {
		c.PartSize = DefaultPartSize
	}
	if c.PartSize < MinPartSize {
		return c, fmt.Errorf("%w: s3.upload.part.size %d is below S3's minimum part size %d (5 MiB)", ErrInvalidConfig, c.PartSize, MinPartSize)
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.MaxAttempts < 1 {
		return c, fmt.Errorf("%w: s3.max-attempts %d must be at least 1", ErrInvalidConfig, c.MaxAttempts)
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.RequestTimeout < 0 || c.MaxBackoff < 0 {
		return c, fmt.Errorf("%w: s3.request.timeout %v and the backoff must not be negative", ErrInvalidConfig, c.RequestTimeout)
	}
	if c.EntropyLength == 0 {
		c.EntropyLength = DefaultEntropyLength
	}
	if c.EntropyKey != "" && (c.EntropyLength < 1 || c.EntropyLength > 32) {
		return c, fmt.Errorf("%w: s3.entropy.length %d must be between 1 and 32", ErrInvalidConfig, c.EntropyLength)
	}
	if c.EntropyKey != "" && strings.Contains(c.EntropyKey, "/") {
		return c, fmt.Errorf("%w: s3.entropy.key %q must not contain a slash", ErrInvalidConfig, c.EntropyKey)
	}
	if c.Endpoint == "" {
		c.Endpoint = os.Getenv("AWS_ENDPOINT_URL_S3")
	}
	if c.Endpoint == "" {
		c.Endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c, fmt.Errorf("%w: s3.endpoint %q is not an http(s) URL", ErrInvalidConfig, c.Endpoint)
		}
	}
	if c.PathStyle == nil {
		ps := c.Endpoint != ""
		c.PathStyle = &ps
	}
	return c, nil
}

// newClient makes the S3 client of c (after withDefaults).
func newClient(ctx context.Context, c Config) (*s3.Client, error) {
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRetryer(func() aws.Retryer {
			// No retry quota: a server that keeps answering 503 would
			// otherwise exhaust it and every later request of the
			// process would fail at once; attempts and backoff bound the
			// retries of one request.
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = c.MaxAttempts
				o.MaxBackoff = c.MaxBackoff
				o.RateLimiter = ratelimit.None
			})
		}),
	}
	if c.Region != "" {
		opts = append(opts, awsconfig.WithRegion(c.Region))
	}
	if c.Profile != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(c.Profile))
	}
	if c.AccessKeyID != "" && c.SecretAccessKey != "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(aws.CredentialsProviderFunc(
			func(context.Context) (aws.Credentials, error) {
				return aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, Source: "sluice s3 config"}, nil
			})))
	}
	// The SDK's buildable client, so that the chain's settings (a CA
	// bundle, AWS_CA_BUNDLE) still apply to it.
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.ResponseHeaderTimeout = c.RequestTimeout
		tr.MaxIdleConnsPerHost = 64
	})
	opts = append(opts, awsconfig.WithHTTPClient(hc))
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3: load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
		o.UsePathStyle = *c.PathStyle
		// Checksums only where S3 requires them: S3-compatible servers do
		// not all take the SDK's newer trailing checksums, and every
		// object already carries a CRC32C the reader verifies.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	}), nil
}

// Location is a parsed s3:// URL.
type Location struct {
	Bucket string
	// Prefix is the key prefix, without leading or trailing slash.
	Prefix string
}

// Schemes are the URL schemes the backend serves (Flink's three).
var Schemes = []string{"s3", "s3a", "s3p"}

// ParseLocation parses s3://bucket/prefix (also s3a:// and s3p://).
func ParseLocation(location string) (Location, error) {
	u, err := url.Parse(location)
	if err != nil {
		return Location{}, fmt.Errorf("%w: location %q: %w", ErrInvalidConfig, location, err)
	}
	ok := false
	for _, s := range Schemes {
		ok = ok || u.Scheme == s
	}
	if !ok {
		return Location{}, fmt.Errorf("%w: location %q is not an s3:// URL", ErrInvalidConfig, location)
	}
	if u.Host == "" {
		return Location{}, fmt.Errorf("%w: location %q names no bucket (s3://bucket/prefix)", ErrInvalidConfig, location)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return Location{}, fmt.Errorf("%w: location %q: no user, query or fragment is allowed", ErrInvalidConfig, location)
	}
	p := strings.Trim(u.Path, "/")
	for _, e := range strings.Split(p, "/") {
		if p != "" && (e == "" || e == "." || e == "..") {
			return Location{}, fmt.Errorf("%w: location %q: the path must be clean", ErrInvalidConfig, location)
		}
	}
	return Location{Bucket: u.Host, Prefix: p}, nil
}

func (l Location) String() string {
	if l.Prefix == "" {
		return "s3://" + l.Bucket
	}
	return "s3://" + l.Bucket + "/" + l.Prefix
}
