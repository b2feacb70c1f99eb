package scaling

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/datadriven"
)

// TestScalingScenarios runs testdata/*. Times (t=) are milliseconds since
// the epoch.
//
//	new [mode=reactive] [cooldown=] [stabilization=] [slots=]
//	<name> p= [max=] [limit=] [group=]         one line per vertex, in order
//	----
//	require t= [cause=]      input lines: <vertex index> <lower> <upper>
//	autoscale t=             input lines: <vertex index> <parallelism>
//	limits t= l=(…)          every vertex's Limit
//	slots t= n= | tick t= | running t= p=(…) | failed t= err= | failover t= [fixed]
//	target slots= [mode=]    input lines as require: Target alone
//	state | history
func TestScalingScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var m *Machine
		var vs []Vertex
		var cfg Config
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			now := time.UnixMilli(d.Int(t, "t", 0))
			if d.Cmd == "new" {
				var err error
				if cfg.Mode, err = ParseMode(d.Str(t, "mode", "default")); err != nil {
					d.Fatalf(t, "%v", err)
				}
				cfg.Cooldown = d.Duration(t, "cooldown", 0)
				cfg.Stabilization = d.Duration(t, "stabilization", 0)
				vs = parseVertices(t, d)
				m = New(cfg, vs, int(d.Int(t, "slots", 0)))
				return m.String()
			}
			if m == nil {
				d.Fatalf(t, "no machine: start with new")
			}
			var acts []Action
			var err error
			switch d.Cmd {
			case "require":
				acts, err = m.Require(now, parseRequirements(t, d), d.Str(t, "cause", "resource requirements"))
			case "autoscale":
				par := map[int]int{}
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					if f := strings.Fields(line); len(f) == 2 {
						n := parseInts(t, d, f)
						par[n[0]] = n[1]
					} else if len(f) > 0 {
						d.Fatalf(t, "autoscale %q: want <vertex> <parallelism>", line)
					}
				}
				acts, err = m.Autoscale(now, par)
			case "limits":
				acts = m.SetLimits(now, parseInts(t, d, d.Vals("l")))
			case "target":
				mode := cfg.Mode
				if d.Has("mode") {
					mode, _ = ParseMode(d.Str(t, "mode", ""))
				}
				p, terr := Target(vs, parseRequirements(t, d), int(d.Int(t, "slots", 0)), mode)
				if terr != nil {
					return "error: " + terr.Error()
				}
				return formatInts(p)
			case "slots":
				acts = m.SetSlots(now, int(d.Int(t, "n", 0)))
			case "tick":
				acts = m.Tick(now)
			case "running":
				acts = m.Running(now, parseInts(t, d, d.Vals("p")))
			case "failed":
				acts = m.RescaleFailed(now, errors.New(strings.ReplaceAll(d.Str(t, "err", "stop checkpoint failed"), "_", " ")))
			case "revert":
				var p []int
				p, acts = m.Revert(now, errors.New(strings.ReplaceAll(d.Str(t, "err", "restore failed"), "_", " ")))
				acts = append([]Action{Log{Msg: "back to " + formatInts(p)}}, acts...)
			case "confirmed":
				m.Confirmed()
				return m.String()
			case "failover":
				var p []int
				p, acts = m.Failover(now, !d.Has("fixed"))
				acts = append([]Action{Log{Msg: "restart at " + formatInts(p)}}, acts...)
			case "state":
				return m.String()
			case "history":
				var out []string
				for _, h := range m.History() {
					out = append(out, strconv.FormatInt(h.Time.UnixMilli(), 10)+" "+formatInts(h.From)+" -> "+formatInts(h.To)+
						" cause="+strconv.Quote(h.Cause)+" outcome="+strconv.Quote(h.Outcome))
				}
				if len(out) == 0 {
					return "(none)"
				}
				return strings.Join(out, "\n")
			default:
				d.Fatalf(t, "unknown command")
			}
			var out []string
			for _, a := range acts {
				out = append(out, a.String())
			}
			if err != nil {
				out = append(out, "error: "+err.Error())
			}
			return strings.Join(append(out, m.String()), "\n")
		})
	})
}

func parseVertices(t *testing.T, d *datadriven.TestData) []Vertex {
	var vs []Vertex
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		v := Vertex{Name: f[0], MaxParallelism: 128}
		for _, kv := range f[1:] {
			k, val, _ := strings.Cut(kv, "=")
			n, err := strconv.Atoi(val)
			if err != nil {
				d.Fatalf(t, "vertex %s: %s: %v", f[0], kv, err)
			}
			switch k {
			case "p":
				v.Parallelism = n
			case "max":
				v.MaxParallelism = n
			case "limit":
				v.Limit = n
			case "group":
				v.Group = n
			default:
				d.Fatalf(t, "vertex %s: unknown %s", f[0], k)
			}
		}
		vs = append(vs, v)
	}
	return vs
}

func parseRequirements(t *testing.T, d *datadriven.TestData) Requirements {
	req := Requirements{}
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			d.Fatalf(t, "requirement %q: want <vertex> <lower> <upper>", line)
		}
		n := parseInts(t, d, f)
		req[n[0]] = Bounds{Lower: n[1], Upper: n[2]}
	}
	return req
}

func parseInts(t *testing.T, d *datadriven.TestData, ss []string) []int {
	out := make([]int, len(ss))
	for i, s := range ss {
		n, err := strconv.Atoi(s)
		if err != nil {
			d.Fatalf(t, "%q: %v", s, err)
		}
		out[i] = n
	}
	return out
}

func formatInts(p []int) string {
	ss := make([]string, len(p))
	for i, n := range p {
		ss[i] = strconv.Itoa(n)
	}
	return "[" + strings.Join(ss, " ") + "]"
}
