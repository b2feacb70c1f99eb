// Command sluice operates Sluice jobs: it lists the jobs of a job's API
// server, prints the per-subtask checkpoint table, takes savepoints, stops
// and cancels jobs, and reads a checkpoint or savepoint offline.
//
//	sluice jobs [--checkpoint-dir DIR]
//	sluice checkpoints JOB [--checkpoint ID]
//	sluice checkpoint JOB [--full]
//	sluice savepoint JOB [--dir DIR] [--no-wait]
//	sluice savepoint --dispose PATH
//	sluice stop JOB [--drain] [--dir DIR]
//	sluice cancel JOB
//	sluice rescale JOB [PARALLELISM] [--vertex ID] [--no-wait]
//	sluice inspect PATH
//	sluice version
//
// --output json prints what the read commands (jobs, checkpoints,
// inspect, version) and the operations report as JSON, in the API's
// shapes.
//
// JOB is a job id, a unique prefix of one (4 characters at least), or a
// job name. The server is at --address (or $SLUICE_ADDRESS, default
// 127.0.0.1:8081; https://host:port for a server with TLS); --token (or
// $SLUICE_TOKEN) is its bearer token, --ca-cert (or $SLUICE_CA_CERT) the
// PEM certificate(s) to trust for its TLS certificate besides the
// system's.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"time"

	"github.com/sluicehq/sluice/api"
)

const usage = `sluice operates Sluice jobs through their API, and reads checkpoints offline.

Usage:
  sluice jobs                                  list the jobs (with how each ended)
  sluice jobs --checkpoint-dir DIR             list, offline, the jobs of a checkpoint
                                               directory: running (and by whom),
                                               suspended, or the recorded result
  sluice checkpoints JOB [--checkpoint ID]     checkpoint counts, summary and the
                                               per-subtask table of the latest
                                               completed checkpoint (or of ID)
  sluice checkpoint JOB [--full]               take a checkpoint now, wait, print
                                               where it is (--full: not incremental)
  sluice savepoint JOB [--dir DIR] [--no-wait] take a savepoint
  sluice savepoint --dispose PATH              delete a savepoint (through the
                                               server; itself when none answers)
  sluice stop JOB [--drain] [--dir DIR]        stop the job with a savepoint
  sluice cancel JOB                            cancel the job
  sluice rescale JOB [PARALLELISM]             rescale the running job in place to
                                               PARALLELISM (every vertex, or the
                                               --vertex ID one) and wait; without
                                               it, print the vertices' bounds
  sluice inspect PATH                          read a checkpoint or savepoint
                                               (its directory, its _metadata, or
                                               a job's checkpoint directory)
  sluice version                               Sluice's module version, Go's version

JOB is a job id, a unique prefix of one, or a job name. --output json
prints the read commands' answers (and the operations' outcomes) as JSON.

The server is at --address (https://host:port for one with TLS, with
--ca-cert for a certificate the system does not trust).

Flags (before or after the command):
`

// exit codes
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// options are the parsed flags.
type options struct {
	address    string
	token      string
	caCert     string
	timeout    time.Duration
	checkpoint int64
	dir        string
	chkDir     string
	drain      bool
	noWait     bool
	vertex     string
	full       bool
	dispose    string
	output     string
}

// errUsage marks a command line that does not make sense.
var errUsage = errors.New("usage")

// run runs the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	var o options
	fs := flag.NewFlagSet("sluice", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := getenv("SLUICE_ADDRESS")
	if addr == "" {
		addr = api.DefaultAddr
	}
	fs.StringVar(&o.address, "address", addr, "address of the job's API server (env SLUICE_ADDRESS)")
	// The variable's token is read after parsing, never shown as the
	// flag's default in the usage text.
	fs.StringVar(&o.token, "token", "", "bearer token of the API server (default: env SLUICE_TOKEN)")
	fs.StringVar(&o.caCert, "ca-cert", getenv("SLUICE_CA_CERT"), "PEM file of the certificate(s) to trust for a server with TLS (--address https://...), besides the system's (env SLUICE_CA_CERT)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long to wait for the server and for savepoints")
	fs.Int64Var(&o.checkpoint, "checkpoint", 0, "checkpoints: the checkpoint to show (default: the latest completed)")
	fs.StringVar(&o.chkDir, "checkpoint-dir", "", "jobs: list the job directories of this checkpoint directory (execution.checkpointing.dir) offline")
	fs.StringVar(&o.dir, "dir", "", "savepoint, stop: the directory to put the savepoint in (default: the job's execution.checkpointing.savepoint-dir, else <execution.checkpointing.dir>/savepoints)")
	fs.BoolVar(&o.drain, "drain", false, "stop: end event time first, so that every timer and window fires")
	fs.BoolVar(&o.noWait, "no-wait", false, "savepoint: print the trigger id and return without waiting; rescale: return once asked")
	fs.StringVar(&o.vertex, "vertex", "", "rescale: the vertex id (GET /jobs/:jobid lists them) to rescale; default every vertex")
	fs.BoolVar(&o.full, "full", false, "checkpoint: a full checkpoint, not an incremental one (Flink's checkpointType FULL)")
	fs.StringVar(&o.dispose, "dispose", "", "savepoint: delete the savepoint at this path instead of taking one")
	fs.StringVar(&o.output, "output", outputText, "text or json: how the read commands print what they read")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if o.token == "" {
		o.token = getenv("SLUICE_TOKEN")
	}
	if len(pos) == 0 {
		fs.Usage()
		return exitUsage
	}
	if err := checkFormat(o.output); err != nil {
		fmt.Fprintf(stderr, "sluice: %v\n", err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	c := api.NewClient(o.address, o.token)
	if o.caCert != "" {
		tr, err := trusting(o.caCert)
		if err != nil {
			fmt.Fprintf(stderr, "sluice: --ca-cert: %v\n", err)
			return exitUsage
		}
		defer tr.CloseIdleConnections()
		c.HTTP = &http.Client{Transport: tr}
	}
	cmd, rest := pos[0], pos[1:]
	switch cmd {
	case "jobs":
		err = want(rest, 0, "jobs", func() error {
			switch {
			case o.chkDir != "" && o.output == outputJSON:
				return listJobDirsJSON(o.chkDir, stdout)
			case o.chkDir != "":
				return listJobDirs(o.chkDir, stdout)
			case o.output == outputJSON:
				return listJobsJSON(ctx, c, stdout)
			}
			return listJobs(ctx, c, stdout)
		})
	case "checkpoints":
		err = want(rest, 1, "checkpoints JOB", func() error {
			if o.output == outputJSON {
				return showCheckpointsJSON(ctx, c, rest[0], o.checkpoint, stdout)
			}
			return showCheckpoints(ctx, c, rest[0], o.checkpoint, stdout)
		})
	case "checkpoint":
		err = want(rest, 1, "checkpoint JOB", func() error { return takeCheckpoint(ctx, c, rest[0], o, stdout) })
	case "savepoint":
		if o.dispose != "" {
			err = want(rest, 0, "savepoint --dispose PATH", func() error { return disposeSavepoint(ctx, c, o.dispose, o, stdout) })
			break
		}
		err = want(rest, 1, "savepoint JOB", func() error { return savepoint(ctx, c, rest[0], o, stdout) })
	case "stop":
		err = want(rest, 1, "stop JOB", func() error { return stopJob(ctx, c, rest[0], o, stdout) })
	case "rescale":
		if len(rest) != 1 && len(rest) != 2 {
			err = fmt.Errorf("%w: rescale JOB [PARALLELISM]", errUsage)
			break
		}
		err = rescale(ctx, c, rest, o, stdout)
	case "cancel":
		err = want(rest, 1, "cancel JOB", func() error { return cancelJob(ctx, c, rest[0], stdout) })
	case "inspect":
		err = want(rest, 1, "inspect PATH", func() error {
			if o.output == outputJSON {
				return inspectPathJSON(rest[0], stdout)
			}
			return inspectPath(rest[0], stdout)
		})
	case "version":
		err = want(rest, 0, "version", func() error { return printVersion(buildInfo(debug.ReadBuildInfo), o.output, stdout) })
	case "help":
		fs.Usage()
		return exitOK
	default:
		err = fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "sluice: %v (sluice help for usage)\n", err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "sluice %s: %v\n", cmd, err)
		return exitError
	}
}

// trusting returns a transport that trusts the certificates of the PEM
// file besides the system's.
func trusting(file string) (*http.Transport, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificate in %s", file)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return tr, nil
}

// want runs f when the command got n arguments.
func want(args []string, n int, form string, f func() error) error {
	if len(args) != n {
		return fmt.Errorf("%w: sluice %s takes %d argument(s), got %d: %s", errUsage, form, n, len(args), strings.Join(args, " "))
	}
	return f()
}

// parseInterspersed parses flags before, between and after the
// positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
