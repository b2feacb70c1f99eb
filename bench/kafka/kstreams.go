package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ksRun is the Kafka Streams reference (bench/kstreamsref: the same keyed
// running count, exactly_once_v2) running as a child JVM.
type ksRun struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	exited chan struct{} // closed when the process has exited
	err    error         // its exit, once exited is closed
}

// startKStreams starts the Kafka Streams reference on in -> out, committing
// every interval (Kafka Streams' commit.interval.ms, its exactly-once
// commit), with the job's parallelism as stream threads, and returns once
// the instance says it runs (its group has its partitions).
func (b *bench) startKStreams(ctx context.Context, in, out, appID, stateDir string, interval time.Duration) (*ksRun, error) {
	java := "java"
	if home := os.Getenv("JAVA_HOME"); home != "" {
		java = home + "/bin/java"
	}
	cmd := exec.Command(java, "-jar", b.kstreams,
		"-bootstrap", strings.Join(b.seeds, ","), "-in", in, "-out", out, "-app-id", appID, "-state-dir", stateDir,
		"-commit-interval-ms", strconv.FormatInt(interval.Milliseconds(), 10), "-threads", strconv.Itoa(b.parallelism))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	r := &ksRun{cmd: cmd, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = r.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start kafka streams (%s): %w", b.kstreams, err)
	}
	running := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "RUNNING" {
				once.Do(func() { close(running) })
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		r.err = cmd.Wait()
		close(r.exited)
	}()
	select {
	case <-running:
		return r, nil
	case <-r.exited:
		return nil, fmt.Errorf("kafka streams exited before it ran: %v\n%s", r.err, r.stderr.tail(20))
	case <-time.After(2 * time.Minute):
	case <-ctx.Done():
	}
	r.kill()
	return nil, fmt.Errorf("kafka streams did not reach RUNNING: %v\n%s", ctx.Err(), r.stderr.tail(20))
}

// peakRSS returns the process's peak resident set (VmHWM), 0 when it
// cannot be read.
func (r *ksRun) peakRSS() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// stop ends the instance as a user would (SIGTERM: Kafka Streams closes
// cleanly) and returns its peak RSS read just before.
func (r *ksRun) stop() (int64, error) {
	rss := r.peakRSS()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
		r.kill()
		return rss, errors.New("kafka streams did not stop within 30 s of SIGTERM")
	}
	return rss, nil
}

// kill ends the process at once and waits for it.
func (r *ksRun) kill() {
	_ = r.cmd.Process.Kill()
	<-r.exited
}

// throughputKStreams runs the reference over the records of in and
// returns its records per second from the moment it runs to the last
// output record visible to a read_committed consumer, and its peak RSS.
func (b *bench) throughputKStreams(in string, interval time.Duration) (float64, int64, error) {
	out, dir, prefix, err := b.next("kscount")
	if err != nil {
		return 0, 0, err
	}
	ks, err := b.startKStreams(b.ctx, in, out, prefix, dir, interval)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	err = b.expect(out, b.records)
	took := time.Since(start)
	rss, serr := ks.stop()
	if err != nil {
		return 0, 0, fmt.Errorf("kafka streams: %w\n%s", err, ks.stderr.tail(20))
	}
	return rate(b.records, took), rss, serr
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// tail returns the last n lines written.
func (l *lockedBuffer) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := strings.Split(strings.TrimRight(l.b.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
