package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/state"
)

// Queries against a running job's keyed state: a keyed operator declares
// some of its states queryable under a job-wide name (Node.Queryable); a
// query names one and a key, is routed to the subtask owning the key's key
// group and read there, on the task goroutine, between two records (state
// is single-threaded per task). The answer is the current value: what the
// subtask has processed so far, including what no completed checkpoint
// covers yet; after a failover it is the restored value, then the value
// as the input is processed again.

var (
	// ErrUnknownQueryableState: no operator of the job declared a
	// queryable state of that name (the state may exist but was not
	// declared queryable).
	ErrUnknownQueryableState = errors.New("no queryable state of that name")
	// ErrQueryKey: the key of a query could not be parsed or encoded.
	ErrQueryKey = errors.New("bad query key")
	// ErrQueryUnavailable: the state cannot be read now (the job is
	// restarting or has ended, the owning task is not running, or it
	// runs in another process that does not answer queries); asking again
	// later may succeed.
	ErrQueryUnavailable = errors.New("queryable state unavailable")
)

// QueryableState is one state of a keyed operator that answers queries.
// The typed parts are closures made by the API.
type QueryableState struct {
	// Name is the job-wide name queries use.
	Name string
	// State is the name of the keyed state read (its descriptor's name).
	State string
	// Key turns a key as a query gives it (text) into the operator's
	// encoded key.
	Key func(text string) ([]byte, error)
	// Read reads the state of the backend's current key and returns it as
	// JSON; found is false when the key has no value. It runs on the task
	// goroutine.
	Read func(b state.KeyedBackend) (value []byte, found bool, err error)
}

// QueryResult is the answer to a query.
type QueryResult struct {
	// Name and Key are the query's.
	Name, Key string
	// Found is false when the key has no value.
	Found bool
	// Value is the value as JSON (nil when not found).
	Value json.RawMessage
	// Operator, Subtask and KeyGroup say where the value was read;
	// Attempt is the job's attempt that answered (0, then +1 for every
	// restart).
	Operator string
	Subtask  int
	KeyGroup int
	Attempt  int
}

// QueryableStates returns the names of the job's queryable states,
// sorted.
func (j *Job) QueryableStates() []string { return queryableNames(j.graph.Load()) }

func queryableNames(g *JobGraph) []string {
	var names []string
	for _, v := range g.Vertices {
		for _, n := range v.Nodes {
			for _, q := range n.Queryable {
				names = append(names, q.Name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// queryTarget is where a query goes: the node declaring the state, the
// task (by id) of the subtask owning the key, and the key itself.
type queryTarget struct {
	node     *Node
	q        *QueryableState
	task     checkpoint.TaskID
	subtask  int
	key      []byte
	keyGroup int
}

// resolveQuery finds the operator declaring name and the subtask owning
// key.
func resolveQuery(g *JobGraph, name, key string) (queryTarget, error) {
	first := checkpoint.TaskID(0)
	for _, v := range g.Vertices {
		for _, n := range v.Nodes {
			for i := range n.Queryable {
				q := &n.Queryable[i]
				if q.Name != name {
					continue
				}
				kb, err := q.Key(key)
				if err != nil {
					return queryTarget{}, fmt.Errorf("%w: queryable state %q: key %q: %w", ErrQueryKey, name, key, err)
				}
				kg := state.KeyGroupFor(kb, v.MaxParallelism)
				sub := state.OperatorIndexFor(kg, v.MaxParallelism, v.Parallelism)
				return queryTarget{node: n, q: q, task: first + checkpoint.TaskID(sub), subtask: sub, key: kb, keyGroup: kg}, nil
			}
		}
		first += checkpoint.TaskID(v.Parallelism)
	}
	declared := queryableNames(g)
	if len(declared) == 0 {
		return queryTarget{}, fmt.Errorf("%w: %q: the job declares no queryable state (sluice.QueryableValueState, table.Materialize)", ErrUnknownQueryableState, name)
	}
	return queryTarget{}, fmt.Errorf("%w: %q: the job declares %s", ErrUnknownQueryableState, name, strings.Join(declared, ", "))
}

// QueryState reads the value of key in the queryable state name of the
// running job, from the subtask that owns the key: its current value, not
// a checkpointed one (see the package's notes on queries). It fails with
// ErrUnknownQueryableState, ErrQueryKey or ErrQueryUnavailable (the job
// is restarting, ended, or its task runs elsewhere), or with the error of
// reading the state; it never answers with another key's value.
func (j *Job) QueryState(ctx context.Context, name, key string) (QueryResult, error) {
	tg, err := resolveQuery(j.graph.Load(), name, key)
	if err != nil {
		return QueryResult{}, err
	}
	a := j.att.Load()
	if a == nil || j.Status() != JobRunning {
		return QueryResult{}, fmt.Errorf("%w: queryable state %q: the job is %s", ErrQueryUnavailable, name, j.Status())
	}
	res := QueryResult{Name: name, Key: key, Operator: tg.node.Name, Subtask: tg.subtask, KeyGroup: tg.keyGroup, Attempt: a.number}
	t := a.task(tg.task)
	if t == nil {
		if r, ok := j.cfg.Executor.(QueryRouter); ok {
			res.Value, res.Found, err = r.QueryState(ctx, a.number, tg.task, name, tg.key)
			return res, err
		}
		return QueryResult{}, fmt.Errorf("%w: queryable state %q: subtask %d of %q runs in another process, which this one does not reach for queries",
			ErrQueryUnavailable, name, tg.subtask, tg.node.Name)
	}
	res.Value, res.Found, err = t.query(ctx, tg.node, tg.q, tg.key, tg.keyGroup)
	return res, err
}

// QueryRouter is implemented by an Executor that routes queries to the
// tasks it runs in other processes (the coordinator of a job on several
// hosts).
type QueryRouter interface {
	QueryState(ctx context.Context, attempt int, task checkpoint.TaskID, name string, key []byte) (value []byte, found bool, err error)
}

// QueryState answers a query routed to one of the runner's tasks (a
// worker of a job on several hosts): key is the encoded key.
func (r *TaskRunner) QueryState(ctx context.Context, attempt int, task checkpoint.TaskID, name string, key []byte) ([]byte, bool, error) {
	a := r.a
	if a.number != attempt {
		return nil, false, fmt.Errorf("%w: queryable state %q: attempt %d asked, this worker runs attempt %d", ErrQueryUnavailable, name, attempt, a.number)
	}
	if int(task) >= len(a.byID) || a.byID[task] == nil {
		return nil, false, fmt.Errorf("%w: queryable state %q: task %d does not run on this worker", ErrQueryUnavailable, name, task)
	}
	t := a.byID[task]
	for _, n := range t.vertex.Nodes {
		for i := range n.Queryable {
			if q := &n.Queryable[i]; q.Name == name {
				kg := state.KeyGroupFor(key, t.vertex.MaxParallelism)
				return t.query(ctx, n, q, key, kg)
			}
		}
	}
	return nil, false, fmt.Errorf("%w: %q is not a queryable state of task %s", ErrUnknownQueryableState, name, t.name)
}

// query reads q for key on the task goroutine and waits for the answer,
// the task's exit or ctx.
func (t *Task) query(ctx context.Context, n *Node, q *QueryableState, key []byte, keyGroup int) ([]byte, bool, error) {
	type answer struct {
		value []byte
		found bool
		err   error
	}
	reply := make(chan answer, 1)
	err := t.mailbox.Put(func() error {
		v, found, err := t.readQueryable(n, q, key, keyGroup)
		reply <- answer{v, found, err}
		return nil // a failed read fails the query, not the task
	})
	if err != nil {
		return nil, false, fmt.Errorf("%w: queryable state %q: task %s has exited (the job is restarting or ending)", ErrQueryUnavailable, q.Name, t.name)
	}
	select {
	case a := <-reply:
		return a.value, a.found, a.err
	case <-t.exitCh:
		// The mail may have run just before the exit.
		select {
		case a := <-reply:
			return a.value, a.found, a.err
		default:
		}
		return nil, false, fmt.Errorf("%w: queryable state %q: task %s exited before it answered (the job is restarting or ending)", ErrQueryUnavailable, q.Name, t.name)
	case <-ctx.Done():
		return nil, false, fmt.Errorf("queryable state %q: task %s: %w", q.Name, t.name, ctx.Err())
	}
}

// readQueryable runs on the task goroutine: it makes key current in the
// node's keyed backend, reads the state and puts the previous current key
// back, so the operator's next record or timer finds what it left.
func (t *Task) readQueryable(n *Node, q *QueryableState, key []byte, keyGroup int) ([]byte, bool, error) {
	var b state.KeyedBackend
	for _, u := range t.units {
		if u.node == n {
			b = u.ctx.KeyedState
		}
	}
	if b == nil {
		return nil, false, fmt.Errorf("%w: queryable state %q: operator %q of task %s has no keyed state", ErrQueryUnavailable, q.Name, n.Name, t.name)
	}
	if !b.KeyGroupRange().Contains(keyGroup) {
		// Never read a key group this subtask does not own: a query
		// routed here is a bug, not a passing state.
		return nil, false, fmt.Errorf("queryable state %q: key group %d routed to task %s, whose range is %v",
			q.Name, keyGroup, t.name, b.KeyGroupRange())
	}
	registered := false
	for _, m := range b.States() {
		if m.Name == q.State {
			registered = true
		}
	}
	if !registered {
		// The operator has not registered the state (yet): nothing is
		// stored under any key. Registering it here would change the
		// operator's state.
		return nil, false, nil
	}
	prevKey, prevGroup := b.CurrentKey()
	prevKey = slices.Clone(prevKey)
	b.SetCurrentKey(key, keyGroup)
	v, found, err := q.Read(b)
	if prevKey != nil {
		b.SetCurrentKey(prevKey, prevGroup)
	}
	if err != nil {
		return nil, false, fmt.Errorf("queryable state %q of operator %q: %w", q.Name, n.Name, err)
	}
	return v, found, nil
}
