package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// event is what the parent learns from a child: a JSON log line it
// printed, or its exit.
type event struct {
	from   string         // the child's name: coordinator, w1, ...
	rec    map[string]any // the log record; nil for an exit
	exited bool
	err    error // the exit's error (nil: status 0)
}

func (e event) msg() string { s, _ := e.rec["msg"].(string); return s }

func (e event) str(key string) string {
	switch v := e.rec[key].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

func (e event) num(key string) int64 { f, _ := e.rec[key].(float64); return int64(f) }

// child is a process of the job that the parent started.
type child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser // held open: the child stops when it closes
	log   string         // the file its output goes to
	done  chan struct{}  // closed once it exited
	err   error          // its exit, once done
}

// children starts and stops the parent's children and turns their output
// into events.
type children struct {
	exe    string
	logDir string
	events chan event
	quit   chan struct{} // closed at shutdown: readers stop sending

	mu   sync.Mutex
	all  []*child
	byID map[string]*child
}

func newChildren(exe, logDir string) *children {
	return &children{exe: exe, logDir: logDir, events: make(chan event, 4096), quit: make(chan struct{}), byID: map[string]*child{}}
}

// start runs the program again as the child name with args; its standard
// output (JSON log lines) and standard error go to a log file, and every
// line it logs comes as an event.
func (cs *children) start(name string, args ...string) (*child, error) {
	logPath := filepath.Join(cs.logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(cs.exe, append(args, "--exit-with-parent")...)
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
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, stdin: stdin, log: logPath, done: make(chan struct{})}
	cs.mu.Lock()
	cs.all = append(cs.all, c)
	cs.byID[name] = c
	cs.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = f.Write(append(line, '\n'))
			var rec map[string]any
			if json.Unmarshal(line, &rec) != nil {
				continue
			}
			cs.send(event{from: name, rec: rec})
		}
		_, _ = io.Copy(f, stdout) // a line too long for the scanner
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
		cs.send(event{from: name, exited: true, err: c.err})
	}()
	return c, nil
}

func (cs *children) send(e event) {
	select {
	case cs.events <- e:
	case <-cs.quit:
	}
}

func (cs *children) get(name string) *child {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.byID[name]
}

// kill SIGKILLs the child, as a crash of its machine would end it.
func (c *child) kill() error { return c.cmd.Process.Kill() }

// exitedWith says how a child ended, for messages.
func (c *child) exitedWith() string {
	select {
	case <-c.done:
	default:
		return "running"
	}
	if c.err == nil {
		return "exit status 0"
	}
	return c.err.Error()
}

// stopAll kills every child still running and waits for them: no child
// outlives the demo, whatever way it ends.
func (cs *children) stopAll() {
	close(cs.quit)
	cs.mu.Lock()
	all := append([]*child(nil), cs.all...)
	cs.mu.Unlock()
	for _, c := range all {
		select {
		case <-c.done:
		default:
			_ = c.kill()
		}
	}
	for _, c := range all {
		_ = c.stdin.Close()
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			fmt.Fprintf(os.Stderr, "clustercount: %s (pid %d) did not exit after SIGKILL\n", c.name, c.cmd.Process.Pid)
		}
	}
}

// tail returns the last n lines of the child's log file.
func (c *child) tail(n int) []string {
	b, err := os.ReadFile(c.log)
	if err != nil {
		return []string{err.Error()}
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}
