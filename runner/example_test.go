package runner_test

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/runner"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// A job as a program: configuration from -D flags, SLUICE_CONF_*
// variables and a config.yaml (Flink's keys and precedence), the REST API
// and dashboard, /metrics, /healthz and /readyz, traces and logging from
// the configuration; SIGTERM suspends the job (it resumes from its latest
// checkpoint when started again). (Compiled, not run: it serves ports.)
func ExampleRun() {
	// [start program]
	conf := sluice.ConfigFlags(flag.CommandLine) // -config FILE, -D key=value
	flag.Parse()
	env := sluice.NewEnvironment(sluice.WithConfiguration(conf), sluice.WithJobName("orders"))
	orders := sluice.FromSource(env, source.FromSlice([]string{"o-1", "o-2"}), sluice.NoWatermarks[string](), "orders")
	sluice.SinkTo(orders, sink.NewPrint[string](), sluice.UID("print"))
	if err := runner.Run(context.Background(), env); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// [end program]
}
