package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	// s3:// paths: the backend registers its schemes.
	_ "github.com/sluicehq/sluice/checkpoint/storage/s3"
	"github.com/sluicehq/sluice/inspect"
)

func inspectPath(path string, out io.Writer) error {
	r, err := inspect.Load(path)
	if err != nil {
		return err
	}
	printReport(r, out)
	return nil
}

func dash(n int64) string {
	if n <= 0 {
		return "-"
	}
	return size(n)
}

func printReport(r *inspect.Report, out io.Writer) {
	fmt.Fprintf(out, "%s %d of job %q\n", r.Kind, r.CheckpointID, r.Job)
	fmt.Fprintf(out, "path       %s\n", r.Dir)
	fmt.Fprintf(out, "triggered  %s, completed %s later\n", r.TriggerTime.Format(time.RFC3339Nano),
		r.CompletionTime.Sub(r.TriggerTime).Round(time.Millisecond))
	fmt.Fprintf(out, "state      %s in %d files and %d inline pieces\n\n", size(r.StateSize), r.Files, r.Inline)

	w := table(out)
	fmt.Fprintln(w, "operator\tsubtask\tparallelism\toperator_state\tkeyed_state\tkey_groups\tkeys\tchannel_state\tcommittables\t")
	for _, op := range r.Operators {
		for _, s := range op.Subtasks {
			kg, keys := "-", "-"
			if s.KeyGroups != nil {
				kg = fmt.Sprintf("%d-%d", s.KeyGroups.Start, s.KeyGroups.End)
				keys = strconv.FormatInt(s.Keys, 10)
				if s.Keys < 0 {
					keys = "not counted (incremental)"
				}
			}
			ch := dash(s.ChannelStateSize)
			if s.ChannelStateSize > 0 {
				ch += fmt.Sprintf(" (%d in, %d out)", s.InputChannels, s.OutputChannels)
			}
			sub := strconv.Itoa(s.Index)
			if s.Finished {
				sub += " (finished)"
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\n", op.UID, sub, op.Parallelism, dash(s.OperatorStateSize),
				dash(s.KeyedStateSize), kg, keys, ch, s.Commits)
		}
	}
	w.Flush()

	var keyed, opStates bool
	for _, op := range r.Operators {
		for _, s := range op.Subtasks {
			keyed = keyed || len(s.States) > 0
			opStates = opStates || len(s.OpStates) > 0
		}
	}
	if keyed {
		fmt.Fprintln(out, "\nkeyed state")
		w = table(out)
		fmt.Fprintln(w, "operator\tsubtask\tstate\tkind\tkeys\tentries\t")
		for _, op := range r.Operators {
			for _, s := range op.Subtasks {
				for _, st := range s.States {
					fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%d\t%d\n", op.UID, s.Index, st.Name, st.Kind, st.Keys, st.Entries)
				}
			}
		}
		w.Flush()
	}
	if opStates {
		fmt.Fprintln(out, "\noperator state")
		w = table(out)
		fmt.Fprintln(w, "operator\tsubtask\tstate\tkind\telements\tbytes\t")
		for _, op := range r.Operators {
			for _, s := range op.Subtasks {
				for _, st := range s.OpStates {
					fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%d\t%s\n", op.UID, s.Index, st.Name, st.Kind, st.Elements, size(st.Bytes))
				}
			}
		}
		w.Flush()
	}
	if len(r.Sources) > 0 {
		fmt.Fprintln(out, "\nsource positions")
		w = table(out)
		fmt.Fprintln(w, "operator\tsubtask\tsource\tposition\t")
		for _, p := range r.Sources {
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", p.Operator, p.Subtask, p.Kind, p)
		}
		w.Flush()
	}
	if len(r.Pending) > 0 {
		fmt.Fprintln(out, "\npending transactions and committables (committed again, idempotently, on restore)")
		w = table(out)
		fmt.Fprintln(w, "operator\tsubtask\tkind\tcommittable\t")
		for _, c := range r.Pending {
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", c.Operator, c.Subtask, c.Kind, c)
		}
		w.Flush()
	}
	if len(r.Problems) > 0 {
		fmt.Fprintln(out, "\nnot decoded")
		for _, p := range r.Problems {
			fmt.Fprintln(out, "  "+p)
		}
	}
}
