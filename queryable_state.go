package sluice

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/state"
)

// Queries against a running job: a keyed operator declares some of its
// value states queryable (QueryableValueState); Job.QueryState, the REST
// API (GET /jobs/:jobid/queryable-state/:name?key=...) and api.Client's
// QueryState read the value of one key, routed to the subtask owning it.
// The answer is the current value, not a checkpointed one: it reflects
// every record that subtask has processed, including those no completed
// checkpoint covers yet, and after a failover it goes back to the
// restored value. A state that was not declared is refused.

// Errors of Job.QueryState (package runtime's).
var (
	ErrUnknownQueryableState = runtime.ErrUnknownQueryableState
	ErrQueryKey              = runtime.ErrQueryKey
	ErrQueryUnavailable      = runtime.ErrQueryUnavailable
)

// QueryResult is the answer to Job.QueryState.
type QueryResult = runtime.QueryResult

// queryableDecl is a QueryableValueState waiting for its operator's key
// codec.
type queryableDecl struct {
	name string
	bind func(keyCodec any) (runtime.QueryableState, error)
}

// QueryableValueState declares the value state d of a keyed operator
// (Process, KeyedCoProcess, ProcessKeyedBroadcast) queryable under name,
// unique in the job: a query gives a key as text (a string key as it is,
// any other key type as JSON: 42, "a", {"A":1}) and gets the key's value
// as JSON, or that there is none. K must be the operator's key type.
//
//	counts := sluice.Process(sluice.KeyBy(clicks, Click.User), &countClicks{},
//		sluice.UID("count"), sluice.QueryableValueState[string](
//			"clicks-per-user", state.ValueStateDescriptor[int64]{Name: "count"}))
//
// A query reads the state as the operator does (on its task, between two
// records); with a TTL that refreshes on read it refreshes the entry.
func QueryableValueState[K comparable, V any](name string, d state.ValueStateDescriptor[V]) OpOption {
	return func(s *opSettings) {
		s.queryables = append(s.queryables, queryableDecl{name: name, bind: func(kc any) (runtime.QueryableState, error) {
			keys, ok := kc.(codec.Codec[K])
			if !ok {
				return runtime.QueryableState{}, fmt.Errorf("queryable state %q is declared for keys of type %T, but the operator's key codec is %T", name, *new(K), kc)
			}
			if _, err := d.Meta(); err != nil {
				return runtime.QueryableState{}, fmt.Errorf("queryable state %q: %w", name, err)
			}
			return runtime.QueryableState{
				Name:  name,
				State: d.Name,
				Key: func(text string) ([]byte, error) {
					k, err := ParseQueryKey[K](text)
					if err != nil {
						return nil, err
					}
					return keys.Append(nil, k)
				},
				Read: func(b state.KeyedBackend) ([]byte, bool, error) {
					h, err := state.GetValueState(b, d)
					if err != nil {
						return nil, false, err
					}
					v, found, err := h.Value()
					if err != nil || !found {
						return nil, false, err
					}
					js, err := json.Marshal(v)
					if err != nil {
						return nil, false, fmt.Errorf("value as JSON: %w", err)
					}
					return js, true, nil
				},
			}, nil
		}})
	}
}

// ParseQueryKey reads a key as queries give it: a string key as it is, a
// number as its decimal text, any other key type as JSON.
func ParseQueryKey[K any](text string) (K, error) {
	var k K
	if p, ok := any(&k).(*string); ok {
		*p = text
		return k, nil
	}
	switch rv := reflect.ValueOf(&k).Elem(); rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(text, 10, rv.Type().Bits())
		if err != nil {
			return k, fmt.Errorf("want an integer key: %w", err)
		}
		rv.SetInt(n)
		return k, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(text, 10, rv.Type().Bits())
		if err != nil {
			return k, fmt.Errorf("want an unsigned integer key: %w", err)
		}
		rv.SetUint(n)
		return k, nil
	case reflect.String:
		rv.SetString(text)
		return k, nil
	}
	if err := json.Unmarshal([]byte(text), &k); err != nil {
		return k, fmt.Errorf("want the key as JSON of %T: %w", k, err)
	}
	return k, nil
}

// bindQueryables gives a keyed operator's queryable states its key codec
// and records them on its node; names must be unique in the job.
func (e *Environment) bindQueryables(n *runtime.Node, keyCodec any) {
	decls := e.pendingQueryables[n]
	delete(e.pendingQueryables, n)
	for _, d := range decls {
		if d.name == "" {
			e.addErr(fmt.Errorf("%w: operator %q: a queryable state needs a name", ErrInvalidOption, n.Name))
			continue
		}
		if prev, dup := e.queryNames[d.name]; dup {
			e.addErr(fmt.Errorf("%w: queryable state %q of operator %q: the name is already used by operator %q", ErrInvalidOption, d.name, n.Name, prev))
			continue
		}
		q, err := d.bind(keyCodec)
		if err != nil {
			e.addErr(fmt.Errorf("%w: operator %q: %w", ErrInvalidOption, n.Name, err))
			continue
		}
		e.queryNames[d.name] = n.Name
		n.Queryable = append(n.Queryable, q)
	}
}

// checkQueryables refuses queryable states declared on operators that are
// not keyed process functions.
func (e *Environment) checkQueryables() {
	for n, decls := range e.pendingQueryables {
		e.addErr(fmt.Errorf("%w: operator %q: queryable state %q: only keyed process functions (Process, KeyedCoProcess, ProcessKeyedBroadcast) declare queryable state",
			ErrInvalidOption, n.Name, decls[0].name))
	}
	clear(e.pendingQueryables)
}
