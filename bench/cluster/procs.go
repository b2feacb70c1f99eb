package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a child process: this binary again (a process of a setup) or
// the checkpointdemo binary.
type proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser // held open; a child of this binary stops when it closes
	log   string         // its standard error
	done  chan struct{}  // closed once it exited

	mu    sync.Mutex
	lines []string // its standard output, a line each
	err   error    // its exit, once done
	begin time.Time
	end   time.Time
}

// running are the children not yet waited for, killed on an interrupt.
var running = struct {
	sync.Mutex
	m map[*proc]bool
}{m: map[*proc]bool{}}

// startProc runs exe with args as the child name, its standard error in
// logDir/name.log.
func startProc(exe, logDir, name string, args ...string) (*proc, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = f
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		f.Close()
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		f.Close()
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, stdin: stdin, log: logPath, done: make(chan struct{}), begin: time.Now()}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	running.Lock()
	running.m[p] = true
	running.Unlock()
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stdout)
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.err, p.end = err, time.Now()
		p.mu.Unlock()
		running.Lock()
		delete(running.m, p)
		running.Unlock()
		close(p.done)
	}()
	return p, nil
}

// stdout returns the lines the child printed so far.
func (p *proc) stdout() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// exitErr is the child's exit (nil: status 0), once done.
func (p *proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// kill SIGKILLs the child if it still runs.
func (p *proc) kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
	}
}

// usage is what the kernel counted for an exited child: its peak
// resident set (ru_maxrss: its VmHWM, but never below this driver's own
// peak when it started the child, since Go starts children with vfork
// and Linux carries the memory the child leaves at exec into its figure;
// the driver stays small, so the figure is the child's) and its CPU time.
type usage struct {
	maxRSSKiB int64
	cpu       time.Duration
}

func (p *proc) usage() usage {
	st := p.cmd.ProcessState
	if st == nil {
		return usage{maxRSSKiB: -1}
	}
	u := usage{maxRSSKiB: -1, cpu: st.UserTime() + st.SystemTime()}
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		u.maxRSSKiB = ru.Maxrss // KiB on Linux
	}
	return u
}

// tail returns the last n lines of the child's standard error.
func (p *proc) tail(n int) []string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return []string{err.Error()}
	}
	s := strings.TrimRight(string(b), "\n")
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// killAll kills every child still running (after an interrupt).
func killAll() {
	running.Lock()
	defer running.Unlock()
	for p := range running.m {
		_ = p.cmd.Process.Kill()
	}
}

// waitAll waits until every child has exited, or kills them all after
// timeout and says so.
func waitAll(ps []*proc, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, p := range ps {
		select {
		case <-p.done:
		case <-deadline.C:
			for _, q := range ps {
				q.kill()
			}
			for _, q := range ps {
				<-q.done
			}
			return fmt.Errorf("timed out after %v (the children were killed)", timeout)
		}
	}
	return nil
}

// closeStdin tells children of this binary that the parent is done.
func closeStdin(ps []*proc) {
	for _, p := range ps {
		_ = p.stdin.Close()
	}
}

// freeLoopbackAddr returns an address of 127.0.0.1 that was free a moment
// ago.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// awaitListening waits until addr accepts connections (the coordinator's
// control plane is up), or p exits, or timeout.
func awaitListening(p *proc, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before listening (%v)", p.name, p.exitErr())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not listening at %s after %v", p.name, addr, timeout)
}

// loadAvg is the 1-minute load average (/proc/loadavg), or "?".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// firstLines is the first n lines of s, for messages.
func firstLines(s []string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	var b bytes.Buffer
	for _, l := range s {
		if len(l) > 300 {
			l = l[:300] + "..."
		}
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}
