package kafkatest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultKafkaVersion is the Apache Kafka version of Local and Container
// clusters when neither KafkaVersion nor KAFKA_VERSION says: that of the
// project's scripts/kafka and docker-compose.yml.
const DefaultKafkaVersion = "4.1.1"

// log4jVersion is the slf4j binding that routes Kafka's logging to log4j2
// (the Kafka distribution ships it; the kafka_2.13 POM does not depend on
// it), as scripts/kafka fetches it.
const log4jVersion = "2.24.3"

// startLocal starts a one-node KRaft broker from the jars with Java, in a
// directory of the test, stopped at its end. It is unavailable without
// Java 17+, or without the jars and a Maven that can fetch them.
func startLocal(tb testing.TB, o Options) ([]string, error) {
	java, err := findJava()
	if err != nil {
		return nil, err
	}
	libs, err := kafkaJars(o.KafkaVersion)
	if err != nil {
		return nil, err
	}
	b := &localBroker{java: java, libs: libs, dir: tb.TempDir()}
	if err := b.start(tb); err != nil {
		return nil, err
	}
	tb.Cleanup(b.stop)
	return []string{b.addr}, nil
}

// findJava finds Java 17 or newer: $JAVA_HOME/bin/java, else java on PATH.
func findJava() (string, error) {
	java := ""
	if h := os.Getenv("JAVA_HOME"); h != "" {
		if p := filepath.Join(h, "bin", "java"); isExecutable(p) {
			java = p
		}
	}
	if java == "" {
		p, err := exec.LookPath("java")
		if err != nil {
			return "", fmt.Errorf("java not found (JAVA_HOME unset, no java on PATH); Kafka needs Java 17 or newer: %w", ErrUnavailable)
		}
		java = p
	}
	out, err := exec.Command(java, "-version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s -version: %v: %w", java, err, ErrUnavailable)
	}
	major, ok := javaMajor(string(out))
	if !ok {
		return "", fmt.Errorf("cannot read the Java version of %s from %q: %w", java, firstLine(string(out)), ErrUnavailable)
	}
	if major < 17 {
		return "", fmt.Errorf("%s is Java %d; Kafka needs Java 17 or newer (set JAVA_HOME): %w", java, major, ErrUnavailable)
	}
	return java, nil
}

var javaVersion = regexp.MustCompile(`version "(\d+)(?:\.(\d+))?`)

// javaMajor reads the major version from `java -version`'s output
// (`openjdk version "17.0.15"`, `java version "1.8.0_392"`).
func javaMajor(out string) (int, bool) {
	m := javaVersion.FindStringSubmatch(out)
	if m == nil {
		return 0, false
	}
	major, err := strconv.Atoi(m[1])
	if err != nil {
		return 0, false
	}
	if major == 1 && m[2] != "" {
		major, err = strconv.Atoi(m[2])
	}
	return major, err == nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// CacheDir is where the Kafka jars are kept: KAFKA_CACHE_DIR, else
// $XDG_CACHE_HOME/sluice, else ~/.cache/sluice (scripts/kafka's cache).
func CacheDir() (string, error) {
	if d := os.Getenv("KAFKA_CACHE_DIR"); d != "" {
		return d, nil
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "sluice"), nil
}

var fetchMu sync.Mutex

// kafkaJars returns the directory of the jars of Kafka version, fetching
// them with Maven when they are not cached.
func kafkaJars(version string) (string, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for the Kafka jars (set KAFKA_CACHE_DIR): %v: %w", err, ErrUnavailable)
	}
	libs := filepath.Join(cache, "kafka-"+version, "libs")
	if _, err := os.Stat(filepath.Join(libs, ".complete")); err == nil {
		return libs, nil
	}
	fetchMu.Lock()
	defer fetchMu.Unlock()
	if _, err := os.Stat(filepath.Join(libs, ".complete")); err == nil {
		return libs, nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", fmt.Errorf("the Kafka %s jars are not in %s and mvn, which fetches them once from Maven Central, is not on PATH (or run scripts/kafka fetch in the Sluice repository): %w",
			version, libs, ErrUnavailable)
	}
	return libs, fetchJars(mvn, version, libs)
}

// fetchJars downloads org.apache.kafka:kafka_2.13:version and its runtime
// dependencies into libs with Maven, as scripts/kafka fetch does (the
// same layout, so either fills the cache for the other).
func fetchJars(mvn, version, libs string) error {
	work, err := os.MkdirTemp("", "sluice-kafka-fetch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	pom := fmt.Sprintf(`<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.sluice.local</groupId>
  <artifactId>kafka-broker-libs</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>%s</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>%s</version></dependency>
  </dependencies>
</project>
`, version, log4jVersion)
	if err := os.WriteFile(filepath.Join(work, "pom.xml"), []byte(pom), 0o644); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	args := append(strings.Fields(os.Getenv("KAFKA_MVN_ARGS")), "-B", "-f", filepath.Join(work, "pom.xml"),
		"dependency:copy-dependencies", "-DincludeScope=runtime", "-DoutputDirectory="+filepath.Join(work, "libs"))
	out, err := exec.CommandContext(ctx, mvn, args...).CombinedOutput()
	if err != nil {
		cause := "Maven failed"
		switch {
		case regexp.MustCompile(`(?i)UnknownHost|Connection refused|connect timed out|Network is unreachable|No route to host|Temporary failure in name resolution|Could not transfer|transfer failed`).Match(out):
			return fmt.Errorf("the Kafka %s jars are not cached in %s and Maven Central is unreachable (offline?): %w", version, libs, ErrUnavailable)
		case regexp.MustCompile(`(?i)could not be resolved|Could not find artifact|was not found`).Match(out):
			cause = fmt.Sprintf("Maven could not resolve org.apache.kafka:kafka_2.13:%s (is it a released 4.x version?)", version)
		}
		return fmt.Errorf("%s fetching the Kafka jars: %v\n%s", cause, err, tailLines(string(out), 8))
	}
	if _, err := os.Stat(filepath.Join(work, "libs", "kafka_2.13-"+version+".jar")); err != nil {
		return fmt.Errorf("maven succeeded but kafka_2.13-%s.jar is missing: %w", version, err)
	}
	if err := os.WriteFile(filepath.Join(work, "libs", ".complete"), nil, 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(libs), 0o755); err != nil {
		return err
	}
	_ = os.RemoveAll(libs)
	if err := os.Rename(filepath.Join(work, "libs"), libs); err != nil {
		if _, serr := os.Stat(filepath.Join(libs, ".complete")); serr == nil {
			return nil // another process cached them meanwhile
		}
		return fmt.Errorf("cache the Kafka jars in %s: %w", libs, err)
	}
	return nil
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// localBroker is one broker process.
type localBroker struct {
	java, libs, dir string
	addr            string
	cmd             *exec.Cmd
	exited          chan struct{}
	waitErr         error
}

const localHost = "127.0.0.1"

func (b *localBroker) jvm() []string {
	heap := strings.Fields(os.Getenv("KAFKA_HEAP_OPTS"))
	if len(heap) == 0 {
		heap = []string{"-Xms256m", "-Xmx1g"}
	}
	return append(append([]string{"-server"}, heap...),
		"-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile="+filepath.Join(b.dir, "log4j2.properties"), "-Dkafka.logs.dir="+b.dir,
		"-cp", filepath.Join(b.libs, "*"))
}

// start writes the configuration, formats the storage, launches the
// broker and waits until it answers.
func (b *localBroker) start(tb testing.TB) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	cport, err := freePort()
	for err == nil && cport == port {
		cport, err = freePort()
	}
	if err != nil {
		return err
	}
	b.addr = net.JoinHostPort(localHost, strconv.Itoa(port))
	if err := b.writeConfig(port, cport); err != nil {
		return err
	}
	args := append(b.jvm(), "kafka.tools.StorageTool", "format", "--config", filepath.Join(b.dir, "server.properties"),
		"--cluster-id", clusterID())
	for _, f := range strings.Fields(os.Getenv("KAFKA_FEATURES")) {
		args = append(args, "--feature", f)
	}
	if out, err := exec.Command(b.java, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("kafka-storage format in %s: %v\n%s", b.dir, err, tailLines(string(out), 15))
	}
	logf, err := os.Create(filepath.Join(b.dir, "stdout.log"))
	if err != nil {
		return err
	}
	b.cmd = exec.Command(b.java, append(b.jvm(), "kafka.Kafka", filepath.Join(b.dir, "server.properties"))...)
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	b.cmd.SysProcAttr = brokerProcAttr()
	if err := b.cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start the broker: %w", err)
	}
	b.exited = make(chan struct{})
	go func() {
		b.waitErr = b.cmd.Wait()
		logf.Close()
		close(b.exited)
	}()
	timeout := 120 * time.Second
	if v, err := strconv.Atoi(os.Getenv("KAFKA_START_TIMEOUT")); err == nil && v > 0 {
		timeout = time.Duration(v) * time.Second
	}
	deadline := time.Now().Add(timeout)
	for !b.answers() {
		select {
		case <-b.exited:
			return fmt.Errorf("the broker exited during startup (%v): %s\n%s", b.waitErr, b.whyFailed(), b.logTail())
		default:
		}
		if time.Now().After(deadline) {
			b.stop()
			return fmt.Errorf("the broker did not answer on %s within %v (KAFKA_START_TIMEOUT)\n%s", b.addr, timeout, b.logTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
	tb.Logf("kafkatest: Apache Kafka broker (from %s) at %s, data in %s", b.libs, b.addr, b.dir)
	return nil
}

// answers reports whether the broker answers an ApiVersions request.
func (b *localBroker) answers() bool {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DialTimeout(time.Second))
	if err != nil {
		return false
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return cl.Ping(ctx) == nil
}

// stop stops the broker: SIGTERM, then a kill after 30 s.
func (b *localBroker) stop() {
	if b.cmd == nil || b.cmd.Process == nil {
		return
	}
	select {
	case <-b.exited:
		return
	default:
	}
	_ = terminate(b.cmd.Process)
	select {
	case <-b.exited:
	case <-time.After(30 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
}

func (b *localBroker) logTail() string {
	var out []string
	for _, f := range []string{"server.log", "stdout.log"} {
		if data, err := os.ReadFile(filepath.Join(b.dir, f)); err == nil && len(data) > 0 {
			out = append(out, f+":\n"+tailLines(string(data), 20))
		}
	}
	return strings.Join(out, "\n")
}

func (b *localBroker) whyFailed() string {
	var all []byte
	for _, f := range []string{"server.log", "stdout.log"} {
		data, _ := os.ReadFile(filepath.Join(b.dir, f))
		all = append(all, data...)
	}
	switch {
	case bytes.Contains(all, []byte("Address already in use")) || bytes.Contains(all, []byte("BindException")):
		return "a port was taken meanwhile: run the test again"
	case bytes.Contains(all, []byte("OutOfMemoryError")):
		return "the JVM ran out of memory (KAFKA_HEAP_OPTS)"
	}
	return "see its log"
}

func (b *localBroker) writeConfig(port, cport int) error {
	props := fmt.Sprintf(`# Written by kafkatest: a single-node KRaft broker for a test.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@%[1]s:%[3]d
listeners=PLAINTEXT://%[1]s:%[2]d,CONTROLLER://%[1]s:%[3]d
advertised.listeners=PLAINTEXT://%[1]s:%[2]d
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=%[4]s/logs
metadata.log.dir=%[4]s/metadata
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=8
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
transaction.max.timeout.ms=3600000
num.network.threads=2
num.io.threads=4
`, localHost, port, cport, b.dir)
	log4j := fmt.Sprintf(`status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = %s/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%%d] %%p %%m (%%c)%%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
`, b.dir)
	if err := os.WriteFile(filepath.Join(b.dir, "server.properties"), []byte(props), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.dir, "log4j2.properties"), []byte(log4j), 0o644)
}

// freePort returns a TCP port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(localHost, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// clusterID is 16 random bytes in URL-safe base64 without padding, not
// starting with '-' (kafka-storage would read it as an option).
func clusterID() string {
	for {
		var b [16]byte
		_, _ = rand.Read(b[:])
		id := base64.RawURLEncoding.EncodeToString(b[:])
		if !strings.HasPrefix(id, "-") {
			return id
		}
	}
}
