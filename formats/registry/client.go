package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// DefaultLookupTimeout bounds one lookup, its retries included (a serde's
// decode and encode block their task until then).
const DefaultLookupTimeout = 30 * time.Second

// Client is a Schema Registry client with the caches the serdes share:
// schemas by id, the subjects and versions of an id, and the resolved
// writer schema of each subject. It is safe for concurrent use; make one
// per registry and share it between serdes.
type Client struct {
	sr      *sr.Client
	timeout time.Duration
	log     *slog.Logger

	mu       sync.RWMutex
	byID     map[int]sr.Schema
	usage    map[int]sr.SubjectSchema // one subject and version of an id
	resolved map[resolveKey]sr.SubjectSchema
	version  map[subjectVersion]sr.SubjectSchema
}

type resolveKey struct {
	subject, schema string
	mode            resolveMode
}

// referencesKey tells schemas with the same text and other references
// apart in the cache.
func referencesKey(refs []sr.SchemaReference) string {
	if len(refs) == 0 {
		return ""
	}
	var b strings.Builder
	for _, r := range refs {
		fmt.Fprintf(&b, "\x00%s\x00%s\x00%d", r.Name, r.Subject, r.Version)
	}
	return b.String()
}

type subjectVersion struct {
	subject string
	version int
}

type clientConfig struct {
	srOpts  []sr.ClientOpt
	timeout time.Duration
	log     *slog.Logger
}

// ClientOption configures a Client.
type ClientOption func(*clientConfig)

// BasicAuth authenticates with HTTP basic authentication (Confluent's
// basic.auth.user.info).
func BasicAuth(user, password string) ClientOption {
	return func(c *clientConfig) { c.srOpts = append(c.srOpts, sr.BasicAuth(user, password)) }
}

// BearerToken authenticates with "Authorization: Bearer token"
// (Confluent's bearer.auth.token).
func BearerToken(token string) ClientOption {
	return func(c *clientConfig) { c.srOpts = append(c.srOpts, sr.BearerToken(token)) }
}

// HTTPClient sets the HTTP client (TLS, proxies, timeouts per request).
func HTTPClient(hc *http.Client) ClientOption {
	return func(c *clientConfig) { c.srOpts = append(c.srOpts, sr.HTTPClient(hc)) }
}

// LookupTimeout bounds a lookup with its retries (default
// DefaultLookupTimeout). A registry that stays unreachable that long makes
// the operation fail with ErrRegistry.
func LookupTimeout(d time.Duration) ClientOption { return func(c *clientConfig) { c.timeout = d } }

// Logger sets the logger of retries (default slog.Default()).
func Logger(l *slog.Logger) ClientOption { return func(c *clientConfig) { c.log = l } }

// SROptions passes options to the underlying franz-go sr.Client, after the
// ones above.
func SROptions(opts ...sr.ClientOpt) ClientOption {
	return func(c *clientConfig) { c.srOpts = append(c.srOpts, opts...) }
}

// NewClient makes a client of the registry at urls, a comma-separated list
// of base URLs (Confluent's schema.registry.url), e.g.
// "http://localhost:8081" or Apicurio's "http://host:8080/apis/ccompat/v7".
func NewClient(urls string, opts ...ClientOption) (*Client, error) {
	var list []string
	for u := range strings.SplitSeq(urls, ",") {
		if u = strings.TrimSpace(u); u != "" {
			list = append(list, strings.TrimRight(u, "/"))
		}
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("registry URL %q names no URL: %w", urls, ErrInvalidConfig)
	}
	cfg := clientConfig{timeout: DefaultLookupTimeout, log: slog.Default()}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.timeout <= 0 {
		return nil, fmt.Errorf("lookup timeout %v must be positive: %w", cfg.timeout, ErrInvalidConfig)
	}
	srOpts := append([]sr.ClientOpt{sr.URLs(list...)}, cfg.srOpts...)
	cl, err := sr.NewClient(srOpts...)
	if err != nil {
		return nil, fmt.Errorf("schema registry client for %s: %v: %w", urls, err, ErrInvalidConfig)
	}
	return &Client{
		sr: cl, timeout: cfg.timeout, log: cfg.log,
		byID:     map[int]sr.Schema{},
		usage:    map[int]sr.SubjectSchema{},
		resolved: map[resolveKey]sr.SubjectSchema{},
		version:  map[subjectVersion]sr.SubjectSchema{},
	}, nil
}

// SR is the underlying franz-go client, for what this package does not
// cover (compatibility settings, deletes).
func (c *Client) SR() *sr.Client { return c.sr }

// notFound says whether err is the registry's answer that the thing asked
// for does not exist (HTTP 404: subject, version or schema not found).
func notFound(err error) bool {
	var re *sr.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound
}

// permanent says whether retrying cannot help: the registry answered with
// a client error other than a timeout or throttling.
func permanent(err error) bool {
	var re *sr.ResponseError
	if !errors.As(err, &re) {
		return errors.Is(err, context.Canceled)
	}
	s := re.StatusCode
	return s >= 400 && s < 500 && s != http.StatusRequestTimeout && s != http.StatusTooManyRequests
}

// call runs op until it succeeds, fails for good, or the lookup timeout
// passes, backing off between tries. Errors of the last try are returned
// as they are (the caller classifies them).
func (c *Client) call(ctx context.Context, what string, op func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil || permanent(err) {
			return err
		}
		c.log.Warn("schema registry request failed, retrying", "request", what, "attempt", attempt, "error", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %w (gave up after %d tries in %v)", ErrRegistry, err, attempt, c.timeout)
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// wrapRegistry makes err name the registry failure sentinel unless it is
// one already.
func wrapRegistry(err error) error {
	if errors.Is(err, ErrRegistry) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrRegistry, err)
}

// SchemaByID returns the schema registered under id (cached). An id the
// registry does not know gives an error wrapping ErrUnknownSchema.
func (c *Client) SchemaByID(ctx context.Context, id int) (sr.Schema, error) {
	c.mu.RLock()
	s, ok := c.byID[id]
	c.mu.RUnlock()
	if ok {
		return s, nil
	}
	err := c.call(ctx, fmt.Sprintf("schema id %d", id), func(ctx context.Context) (err error) {
		s, err = c.sr.SchemaByID(ctx, id)
		return err
	})
	switch {
	case err == nil:
	case notFound(err):
		return sr.Schema{}, &SchemaError{Op: "look up", ID: id, Err: fmt.Errorf("%w: %w", ErrUnknownSchema, err)}
	default:
		return sr.Schema{}, &SchemaError{Op: "look up", ID: id, Err: wrapRegistry(err)}
	}
	c.mu.Lock()
	c.byID[id] = s
	c.mu.Unlock()
	return s, nil
}

// Usage returns one subject and version under which id is registered,
// for error messages (cached; best effort: zero when the registry does
// not say).
func (c *Client) Usage(ctx context.Context, id int) (subject string, version int) {
	c.mu.RLock()
	u, ok := c.usage[id]
	c.mu.RUnlock()
	if !ok {
		ctx, cancel := context.WithTimeout(ctx, min(c.timeout, 5*time.Second))
		defer cancel()
		if vs, err := c.sr.SchemaVersionsByID(ctx, id); err == nil && len(vs) > 0 {
			u = sr.SubjectSchema{Subject: vs[0].Subject, Version: vs[0].Version}
		}
		c.mu.Lock()
		c.usage[id] = u
		c.mu.Unlock()
	}
	return u.Subject, u.Version
}

// SchemaByVersion returns version of subject (cached; -1 is the latest
// version, which is looked up each time).
func (c *Client) SchemaByVersion(ctx context.Context, subject string, version int) (sr.SubjectSchema, error) {
	key := subjectVersion{subject, version}
	if version > 0 {
		c.mu.RLock()
		s, ok := c.version[key]
		c.mu.RUnlock()
		if ok {
			return s, nil
		}
	}
	var s sr.SubjectSchema
	err := c.call(ctx, fmt.Sprintf("subject %q version %d", subject, version), func(ctx context.Context) (err error) {
		s, err = c.sr.SchemaByVersion(ctx, subject, version)
		return err
	})
	switch {
	case err == nil:
	case notFound(err):
		return s, &SchemaError{Op: "look up", Subject: subject, Version: max(version, 0), Err: fmt.Errorf("%w: %w", ErrNotRegistered, err)}
	default:
		return s, &SchemaError{Op: "look up", Subject: subject, Version: max(version, 0), Err: wrapRegistry(err)}
	}
	c.mu.Lock()
	c.version[subjectVersion{subject, s.Version}] = s
	c.byID[s.ID] = s.Schema
	c.usage[s.ID] = s
	c.mu.Unlock()
	return s, nil
}

// Register registers schema under subject (or finds it there) and
// returns its id and version (cached).
func (c *Client) Register(ctx context.Context, subject string, schema sr.Schema) (sr.SubjectSchema, error) {
	return c.resolve(ctx, subject, schema, modeRegister)
}

// Lookup finds schema under subject without registering it (cached); a
// schema not there gives an error wrapping ErrNotRegistered.
func (c *Client) Lookup(ctx context.Context, subject string, schema sr.Schema) (sr.SubjectSchema, error) {
	return c.resolve(ctx, subject, schema, modeLookup)
}

type resolveMode uint8

const (
	modeRegister resolveMode = iota // register (or find) the schema
	modeLookup                      // find the schema, never register
	modeLatest                      // the subject's latest version
)

// resolve gives the writer schema of subject for the local schema s, by
// mode; cached per subject, schema and mode, so a serde asks once.
func (c *Client) resolve(ctx context.Context, subject string, s sr.Schema, mode resolveMode) (sr.SubjectSchema, error) {
	key := resolveKey{subject, s.Schema + referencesKey(s.References), mode}
	c.mu.RLock()
	got, ok := c.resolved[key]
	c.mu.RUnlock()
	if ok {
		return got, nil
	}
	var err error
	switch mode {
	case modeLatest:
		got, err = c.SchemaByVersion(ctx, subject, -1)
		if err != nil {
			return got, err
		}
	case modeRegister, modeLookup:
		op := "register"
		if mode == modeLookup {
			op = "look up"
		}
		err = c.call(ctx, fmt.Sprintf("%s under subject %q", op, subject), func(ctx context.Context) (err error) {
			if mode == modeRegister {
				// Register, then look up for the version: both are in every
				// Confluent-compatible API (unlike the usages by id that
				// sr.CreateSchema asks for).
				var id int
				if id, err = c.sr.RegisterSchema(ctx, subject, s, -1, -1); err != nil {
					return err
				}
				if got, err = c.sr.LookupSchema(ctx, subject, s); err != nil || got.ID != id {
					got = sr.SubjectSchema{Subject: subject, ID: id, Schema: s}
				}
				return nil
			}
			got, err = c.sr.LookupSchema(ctx, subject, s)
			return err
		})
		switch {
		case err == nil:
		case mode == modeLookup && notFound(err):
			return got, &SchemaError{Op: op, Subject: subject, Err: fmt.Errorf("%w (auto-registration is off): %w", ErrNotRegistered, err)}
		default:
			var re *sr.ResponseError
			if errors.As(err, &re) && re.StatusCode == http.StatusConflict {
				err = fmt.Errorf("%w: incompatible with the subject's versions: %w", ErrSchemaMismatch, err)
			} else if errors.As(err, &re) && re.StatusCode == http.StatusUnprocessableEntity {
				err = fmt.Errorf("%w: the registry refused the schema: %w", ErrInvalidConfig, err)
			} else {
				err = wrapRegistry(err)
			}
			return got, &SchemaError{Op: op, Subject: subject, Err: err}
		}
		// It is our schema that was found: keep our text and type (some
		// registries, Apicurio's Confluent API among them, leave the type
		// out of the lookup's answer, which then reads as Avro).
		got.Schema = s
		if got.Subject == "" {
			got.Subject = subject
		}
	}
	c.mu.Lock()
	c.resolved[key] = got
	if _, ok := c.byID[got.ID]; !ok {
		c.byID[got.ID] = got.Schema
	}
	if got.Version > 0 {
		c.usage[got.ID] = got
	}
	c.mu.Unlock()
	return got, nil
}
