package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The keys of these tests, declared as a package declares its own.
var (
	testInterval = Duration("test.interval", "An interval.").Default(10 * time.Second)
	testSize     = MemorySize("test.size", "A size.")
	testCount    = Int("test.count", "A count.").Default(1).Check(AtLeast(1)).DeprecatedKeys("test.old-count")
	testOn       = Bool("test.on", "A switch.")
	testHosts    = List("test.hosts", "Hosts.")
	testMode     = Choice("test.mode", "A mode.", "EXACTLY_ONCE", "AT_LEAST_ONCE")
	_            = String("test.credential", "A secret whose name does not say so.").Sensitive()
	testPIN      = Int("test.pin", "A secret number.").Sensitive().Check(AtLeast(1000))
	_            = String("test.name", "A name.")
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Durations take Flink's forms, with or without a space, fractions, and
// Go's; every package's keys parse them with this one function.
func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"500": 500 * time.Millisecond, "10 s": 10 * time.Second, "10s": 10 * time.Second, "1 min": time.Minute, "1min": time.Minute,
		"2m": 2 * time.Minute, "3 h": 3 * time.Hour, "1d": 24 * time.Hour, "1 d": 24 * time.Hour, "250 ms": 250 * time.Millisecond,
		"500ms": 500 * time.Millisecond, "7 seconds": 7 * time.Second, "5 MINUTES": 5 * time.Minute, "100 us": 100 * time.Microsecond,
		"100µs": 100 * time.Microsecond, "9ns": 9, "1m30s": 90 * time.Second, "1.5s": 1500 * time.Millisecond,
		"1.5 s": 1500 * time.Millisecond, "0.5 d": 12 * time.Hour, "2 days": 48 * time.Hour, "0": 0, " 15 s ": 15 * time.Second,
		"1.0000000005 s": time.Second + 1, // rounded to the nanosecond
	} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "ten", "-1", "-5s", "5 fortnights", "1 s 2", "99999999999999999 d", ".5 s", "1. s", "1.2.3 s", "s"} {
		if d, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, d)
		}
	}
	for _, d := range []time.Duration{0, time.Second, 90 * time.Second, time.Hour, 36 * time.Hour, 1500 * time.Microsecond, 7} {
		if got, err := ParseDuration(FormatDuration(d)); err != nil || got != d {
			t.Errorf("FormatDuration(%v) = %q, which parses to %v, %v", d, FormatDuration(d), got, err)
		}
	}
}

func TestParseMemorySizeAndList(t *testing.T) {
	for in, want := range map[string]int64{"32kb": 32 << 10, "64 mb": 64 << 20, "4096": 4096, "1k": 1 << 10, "2 mebibytes": 2 << 20,
		"8gb": 8 << 30, "1 TB": 1 << 40, "100b": 100} {
		if got, err := ParseMemorySize(in); err != nil || got != want {
			t.Errorf("ParseMemorySize(%q) = %v, %v; want %v", in, got, err, want)
		}
		if got, _ := ParseMemorySize(FormatMemorySize(want)); got != want {
			t.Errorf("FormatMemorySize(%d) = %q", want, FormatMemorySize(want))
		}
	}
	for _, in := range []string{"", "big", "-1kb", "1.5mb", "99999999999 tb"} {
		if n, err := ParseMemorySize(in); err == nil {
			t.Errorf("ParseMemorySize(%q) = %v, want an error", in, n)
		}
	}
	for in, want := range map[string][]string{"[a, 'b', \"c\"]": {"a", "b", "c"}, "a;b,c": {"a", "b", "c"}, "": nil, "[]": nil} {
		if got, _ := ParseList(in); !reflect.DeepEqual(got, want) {
			t.Errorf("ParseList(%q) = %q, want %q", in, got, want)
		}
	}
	for _, in := range []string{"yes", "1", "on", ""} {
		if _, err := ParseBool(in); err == nil {
			t.Errorf("ParseBool(%q) accepted", in)
		}
	}
}

func TestYAMLKeyLines(t *testing.T) {
	got := yamlKeyLines([]byte("# comment\na:\n  b: 1\n  'c.d': |\n    e: not a key\n    f: nor this\n  g: 2\n\"h\": [1, 2]\ni.j: {k: 3}\n- item\nl:\n  - m: 4\n"))
	want := map[string][]int{"a": {2}, "a.b": {3}, "a.c.d": {4}, "a.g": {7}, "h": {8}, "i.j": {9}, "l": {11}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("yamlKeyLines = %v, want %v", got, want)
	}
}

// A key's value is read with its type, its default when unset, and an
// error naming the key, the value and where it came from.
func TestKeyGet(t *testing.T) {
	p := writeFile(t, "test:\n  interval: 1.5 s\n  size: 64 mb\n  old-count: 3\n  hosts: [a, b]\n  mode: exactly-once\n")
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if d, set, err := testInterval.Get(c); d != 1500*time.Millisecond || !set || err != nil {
		t.Errorf("interval %v, %v, %v", d, set, err)
	}
	if n, _, _ := testSize.Get(c); n != 64<<20 {
		t.Errorf("size %d", n)
	}
	if n, set, _ := testCount.Get(c); n != 3 || !set || c.Source("test.count") != p+":4" {
		t.Errorf("count %d (set %v) from %q: the deprecated name is the key", n, set, c.Source("test.count"))
	}
	if h, _, _ := testHosts.Get(c); !reflect.DeepEqual(h, []string{"a", "b"}) {
		t.Errorf("hosts %q", h)
	}
	if m, _, _ := testMode.Get(c); m != "EXACTLY_ONCE" {
		t.Errorf("mode %q, want it as the choices spell it", m)
	}
	if on, set, err := testOn.Get(c); on || set || err != nil {
		t.Errorf("an unset key: %v, %v, %v", on, set, err)
	}
	if d, set, _ := testInterval.Get(New()); d != 10*time.Second || set {
		t.Errorf("the default: %v (set %v)", d, set)
	}
	if d, set, _ := testInterval.Get(nil); d != 10*time.Second || set {
		t.Errorf("a nil configuration: %v (set %v)", d, set)
	}

	// A value stored unchecked is refused when read, with its source.
	c.SetUnchecked("test.count", "0", "x.yaml:7")
	_, _, err = testCount.Get(c)
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != "test.count" || ce.Value != "0" || ce.Source != "x.yaml:7" ||
		!errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "must be at least 1") {
		t.Errorf("a bad value read: %v", err)
	}
}

func TestSetErrors(t *testing.T) {
	c := New()
	for _, tc := range []struct{ key, value, want string }{
		{"test.interval", "soon", "want a duration"},
		{"test.count", "0", "must be at least 1"},
		{"test.on", "yes", "want true or false"},
		{"test.mode", "twice", "want EXACTLY_ONCE or AT_LEAST_ONCE"},
		{"test.intervall", "1", "did you mean test.interval?"},
	} {
		err := c.Set(tc.key, tc.value)
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != tc.key || ce.Source != "Set" || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Set(%s, %s): %v, want an error about %q", tc.key, tc.value, err, tc.want)
		}
	}
	if err := c.Set("test.intervall", "1"); !errors.Is(err, ErrUnknownKey) || !errors.Is(err, ErrInvalidOption) {
		t.Errorf("unknown key: %v", err)
	}
	p := writeFile(t, "test.name: [a, b]\n")
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "not a list") || !strings.Contains(err.Error(), p+":1") {
		t.Errorf("a list for one value: %v", err)
	}
}

// Secrets are masked: by the key's declaration, or by its name.
func TestSensitive(t *testing.T) {
	c := New()
	if err := c.Set("test.credential", "hunter2"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(c.String(), "hunter2") || !strings.Contains(c.String(), "test.credential: ******") {
		t.Errorf("String() = %q", c.String())
	}
	err := c.KeyError("test.credential", errors.New("refused"))
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("KeyError shows the secret: %v", err)
	}
	if !Sensitive("some.password") || !Sensitive("x.sasl.jaas.config") || Sensitive("test.name") {
		t.Error("Sensitive by name")
	}
}

// An unknown key of a package the program does not import names it.
func TestHint(t *testing.T) {
	Hint("nowhere.", "the nowhere.* keys are read by example.com/nowhere: import it")
	Hint("test.", "never shown: the test.* keys are declared")
	err := New().Set("nowhere.thing", "1")
	if !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), "example.com/nowhere") {
		t.Errorf("unknown key of a package not linked: %v", err)
	}
	err = New().Set("test.nope", "1")
	if !errors.Is(err, ErrUnknownKey) || strings.Contains(err.Error(), "never shown") {
		t.Errorf("unknown key beside declared ones: %v", err)
	}
}

// A key two packages declare is refused at once.
func TestDeclareTwice(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "test.interval") {
			t.Errorf("recovered %v, want a panic naming the key", r)
		}
	}()
	Bool("test.interval", "again")
}

func TestDeclared(t *testing.T) {
	var found *Description
	for _, d := range Declared() {
		if d.Key == "test.count" {
			found = &d
		}
	}
	if found == nil || found.Kind != "integer" || found.Default != "1" || !reflect.DeepEqual(found.Deprecated, []string{"test.old-count"}) ||
		found.Package != "github.com/sluicehq/sluice/config" || found.Doc != "A count." {
		t.Errorf("description %+v", found)
	}
}

// The layers apart, for a package that ranks sources between them.
func TestOnly(t *testing.T) {
	t.Setenv("SLUICE_CONF_TEST_NAME", "env")
	c, err := Load(writeFile(t, "test.name: file\ntest.count: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.FromEnv(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ParseDynamicProperties([]string{"-Dtest.count=4"}); err != nil {
		t.Fatal(err)
	}
	file := c.Only(LayerFile)
	if v, _ := file.Get("test.name"); v != "file" {
		t.Errorf("file layer: name %q", v)
	}
	if v, _ := c.Get("test.name"); v != "env" {
		t.Errorf("all layers: name %q", v)
	}
	if _, ok := c.Only(LayerEnv).Get("test.count"); ok {
		t.Error("the environment's layer has the file's count")
	}
	if n, _, _ := testCount.Get(c.Only(LayerFile, LayerDynamic)); n != 4 {
		t.Errorf("file and -D: count %d", n)
	}
}

type keyFlag struct{ got []string }

func (k *keyFlag) String() string        { return strings.Join(k.got, " ") }
func (k *keyFlag) Set(s string) error    { k.got = append(k.got, s); return nil }
func (k *keyFlag) Takes(key string) bool { return key == "test.count" }

// A -D registered before Flags gets the keys it takes, under their
// canonical names; every -D goes into the configuration.
func TestFlagsShareD(t *testing.T) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "SLUICE_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	earlier := &keyFlag{}
	fs.Var(earlier, "D", "the earlier -D")
	c := Flags(fs)
	if err := fs.Parse([]string{"-D", "test.old-count=5", "-D", "test.name=x"}); err != nil {
		t.Fatal(err)
	}
	if earlier.String() != "test.count=5" {
		t.Errorf("the earlier -D got %q, want test.count=5 alone", earlier.String())
	}
	if n, _, _ := testCount.Get(c); n != 5 {
		t.Errorf("count %d", n)
	}
	if v, _ := c.Get("test.name"); v != "x" {
		t.Errorf("name %q", v)
	}
}

// The checks of whole configurations run in Validate, with the keys
// stored unchecked that no package declares.
func TestValidate(t *testing.T) {
	RegisterCheck(func(c *Configuration) error {
		if v, _ := c.Get("test.name"); v == "forbidden" {
			return c.KeyError("test.name", errors.New("this name is taken"))
		}
		return nil
	})
	c := New()
	if err := c.Set("test.name", "forbidden"); err != nil {
		t.Fatal(err)
	}
	c.SetUnchecked("test.nowhere", "1", "x.yaml:2")
	err := c.Validate()
	for _, want := range []string{"Set: test.name = \"forbidden\": this name is taken", "x.yaml:2: test.nowhere", "unknown configuration key"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want %q", err, want)
		}
	}
}

// Blame names the set key a message names, the longest first.
func TestBlame(t *testing.T) {
	c := New()
	for k, v := range map[string]string{"test.count": "2", "test.name": "x"} {
		if err := c.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	var ce *Error
	if err := c.Blame(errors.New("test.count is below test.size"), "test.name"); !errors.As(err, &ce) || ce.Key != "test.count" {
		t.Errorf("Blame: %v", err)
	}
	if err := c.Blame(errors.New("nothing named"), "test.name"); !errors.As(err, &ce) || ce.Key != "test.name" {
		t.Errorf("Blame's fallback: %v", err)
	}
}

// Fields serve a package's Set method and its reading of a
// configuration with the same keys and parsers.
func TestFields(t *testing.T) {
	type settings struct {
		count int
		every time.Duration
		pin   int
	}
	fields := Fields[settings]{
		Field(testCount, func(s *settings, n int) { s.count = n }),
		Field(testInterval, func(s *settings, d time.Duration) { s.every = d }),
		Field(testPIN, func(s *settings, n int) { s.pin = n }),
	}
	var s settings
	if err := fields.Set(&s, "test.old-count", "3"); err != nil || s.count != 3 {
		t.Errorf("Set by the deprecated name: %v, %+v", err, s)
	}
	if err := fields.Set(&s, "test.count", "0"); err == nil || errors.Is(err, ErrUnknownKey) ||
		!strings.Contains(err.Error(), `test.count="0": must be at least 1`) {
		t.Errorf("Set of a value the key's check refuses: %v", err)
	}
	if err := fields.Set(&s, "test.pin", "0042"); err == nil || strings.Contains(err.Error(), "0042") ||
		!strings.Contains(err.Error(), `test.pin="******": must be at least 1000`) {
		t.Errorf("Set of a secret the key's check refuses shows it: %v", err)
	}
	if err := fields.Set(&s, "test.on", "true"); !errors.Is(err, ErrUnknownKey) || fields.Takes("test.on") || !fields.Takes("test.old-count") {
		t.Errorf("a key not among the fields: %v", err)
	}
	c := New()
	if set, err := fields.Configure(&s, c); set || err != nil {
		t.Errorf("an empty configuration: %v, %v", set, err)
	}
	if err := c.Set("test.interval", "1 min"); err != nil {
		t.Fatal(err)
	}
	s = settings{}
	if set, err := fields.Configure(&s, c); !set || err != nil || s != (settings{every: time.Minute}) {
		t.Errorf("Configure: %v, %v, %+v", set, err, s)
	}
}
