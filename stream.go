package sluice

import (
	"fmt"
	"reflect"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/state"
)

// Codec encodes records of type T for the network and for state.
type Codec[T any] = codec.Codec[T]

// Collector receives the records a user function emits.
type Collector[T any] = operators.Collector[T]

// OpOption sets a property of one operator.
type OpOption func(*opSettings)

type opSettings struct {
	name            string
	uid             string
	parallelism     int
	maxParallelism  int
	disableChaining bool
	codec           any
	queryables      []queryableDecl
}

// Name names the operator in logs, metrics and errors.
func Name(name string) OpOption { return func(s *opSettings) { s.name = name } }

// UID sets the operator's stable id, by which its state is mapped on
// restore; it must be unique in the job. Without it the name is used,
// with "#2", "#3"... for later operators of the same name: set UIDs on
// stateful operators so that a changed pipeline still maps their state.
func UID(uid string) OpOption { return func(s *opSettings) { s.uid = uid } }

// Parallelism sets the operator's number of parallel subtasks.
func Parallelism(n int) OpOption { return func(s *opSettings) { s.parallelism = n } }

// MaxParallelism sets the operator's number of key groups.
func MaxParallelism(n int) OpOption { return func(s *opSettings) { s.maxParallelism = n } }

// DisableChaining keeps the operator out of any operator chain.
func DisableChaining() OpOption { return func(s *opSettings) { s.disableChaining = true } }

// WithCodec sets the codec of the operator's output records; the default
// is codec.Default for the type (codec.DefaultFor with WithDefaultCodec's
// format).
func WithCodec[T any](c Codec[T]) OpOption { return func(s *opSettings) { s.codec = c } }

// Stream is a typed stream of records. A stream from Union has several
// producing operators.
type Stream[T any] struct {
	env     *Environment
	from    []*runtime.Node
	part    runtime.Partitioner
	keyHash any
}

// Rebalance distributes the records round robin over the next operator's
// subtasks.
func (s *Stream[T]) Rebalance() *Stream[T] { return s.withPartitioner(runtime.PartitionRebalance) }

// Broadcast sends every record to every subtask of the next operator.
func (s *Stream[T]) Broadcast() *Stream[T] { return s.withPartitioner(runtime.PartitionBroadcast) }

// Forward sends subtask i's records to subtask i of the next operator,
// which must have the same parallelism.
func (s *Stream[T]) Forward() *Stream[T] { return s.withPartitioner(runtime.PartitionForward) }

func (s *Stream[T]) withPartitioner(p runtime.Partitioner) *Stream[T] {
	c := *s
	c.part, c.keyHash = p, nil
	return &c
}

// newNode adds an operator node fed by every producer of the inputs.
func newNode[OUT any](env *Environment, defName string, opts []OpOption, out bool) (*runtime.Node, *opSettings) {
	set := &opSettings{name: defName}
	for _, o := range opts {
		o(set)
	}
	n := &runtime.Node{
		Name: set.name, UID: set.uid, Parallelism: set.parallelism,
		MaxParallelism: set.maxParallelism, DisableChaining: set.disableChaining,
	}
	if n.UID == "" {
		// Without an explicit uid, the name (made unique by its position
		// among operators of the same name) maps the state.
		n.UID = n.Name
		for i := 2; env.uids[n.UID] != ""; i++ {
			n.UID = fmt.Sprintf("%s#%d", n.Name, i)
		}
	} else if prev, dup := env.uids[n.UID]; dup {
		env.addErr(fmt.Errorf("%w: uid %q of operator %q is already used by operator %q", ErrInvalidOption, n.UID, n.Name, prev))
	}
	env.uids[n.UID] = n.Name
	if len(set.queryables) > 0 {
		env.pendingQueryables[n] = set.queryables
	}
	if set.parallelism < 0 || set.maxParallelism < 0 {
		env.addErr(fmt.Errorf("%w: operator %q: parallelism must not be negative", ErrInvalidOption, n.Name))
	}
	if out {
		c := defaultCodec[OUT](env)
		if set.codec != nil {
			cc, ok := set.codec.(codec.Codec[OUT])
			if !ok {
				env.addErr(fmt.Errorf("%w: operator %q: codec %T does not encode its output type %T", ErrInvalidOption, n.Name, set.codec, *new(OUT)))
			} else {
				c = cc
			}
		}
		n.Out = runtime.TypeOf[OUT](c)
	}
	env.plan.Add(n)
	return n, set
}

// connect adds the edges from every producer of s to input index of n.
func connect[T any](s *Stream[T], n *runtime.Node, index int) {
	for _, from := range s.from {
		s.env.plan.Connect(from, n, s.part, index, s.keyHash)
	}
}

func newStream[T any](env *Environment, n *runtime.Node) *Stream[T] {
	return &Stream[T]{env: env, from: []*runtime.Node{n}}
}

// Map applies fn to every record.
func Map[T, U any](s *Stream[T], fn func(T) (U, error), opts ...OpOption) *Stream[U] {
	n, _ := newNode[U](s.env, "Map", opts, true)
	n.Build = func(out any) (operators.Operator, []any, error) {
		op := operators.NewMap(fn, out.(operators.Output[U]))
		return op, []any{op}, nil
	}
	connect(s, n, 0)
	return newStream[U](s.env, n)
}

// Filter keeps the records for which fn returns true.
func Filter[T any](s *Stream[T], fn func(T) (bool, error), opts ...OpOption) *Stream[T] {
	n, _ := newNode[T](s.env, "Filter", opts, true)
	n.Build = func(out any) (operators.Operator, []any, error) {
		op := operators.NewFilter(fn, out.(operators.Output[T]))
		return op, []any{op}, nil
	}
	connect(s, n, 0)
	return newStream[T](s.env, n)
}

// FlatMap emits any number of records for every record.
func FlatMap[T, U any](s *Stream[T], fn func(T, Collector[U]) error, opts ...OpOption) *Stream[U] {
	n, _ := newNode[U](s.env, "FlatMap", opts, true)
	n.Build = func(out any) (operators.Operator, []any, error) {
		op := operators.NewFlatMap(fn, out.(operators.Output[U]))
		return op, []any{op}, nil
	}
	connect(s, n, 0)
	return newStream[U](s.env, n)
}

// Union merges streams of the same type into one.
func Union[T any](first *Stream[T], more ...*Stream[T]) *Stream[T] {
	u := &Stream[T]{env: first.env}
	for _, s := range append([]*Stream[T]{first}, more...) {
		if s.env != first.env {
			first.env.addErr(fmt.Errorf("%w: Union of streams from different environments", ErrInvalidOption))
			continue
		}
		if s.part != runtime.PartitionDefault && s.part != runtime.PartitionForward {
			first.env.addErr(fmt.Errorf("%w: Union of a partitioned stream: partition the union instead", ErrInvalidOption))
		}
		u.from = append(u.from, s.from...)
	}
	return u
}

// SinkTo writes the stream to a sink.
func SinkTo[T any](s *Stream[T], snk sink.Sink[T], opts ...OpOption) {
	n, _ := newNode[T](s.env, "Sink", opts, false)
	if v, ok := snk.(checkpointValidator); ok {
		s.env.validators = append(s.env.validators, v)
	}
	if b, ok := snk.(sink.JobAware); ok {
		s.env.jobAware = append(s.env.jobAware, jobAwareSink{node: n, sink: b})
	}
	n.Build = func(any) (operators.Operator, []any, error) {
		op := operators.NewSink(snk)
		return op, []any{op}, nil
	}
	connect(s, n, 0)
}

// KeyedStream is a stream partitioned by a key: records with the same key
// go to the same subtask, which owns that key's state and timers.
type KeyedStream[K comparable, T any] struct {
	stream   *Stream[T]
	keyOf    func(T) K
	keyCodec Codec[K]
}

// KeyBy partitions the stream by the key keyOf returns, encoded with the
// default key codec of K (codec.DefaultKey: JSON for composite keys, as in
// earlier versions, so that the state of their savepoints is found).
func KeyBy[T any, K comparable](s *Stream[T], keyOf func(T) K) *KeyedStream[K, T] {
	return KeyByCodec(s, keyOf, codec.DefaultKey[K]())
}

// KeyByCodec is KeyBy with the key codec given: the key group of a record
// is the hash of its encoded key modulo the max parallelism.
func KeyByCodec[T any, K comparable](s *Stream[T], keyOf func(T) K, kc Codec[K]) *KeyedStream[K, T] {
	ks := s.withPartitioner(runtime.PartitionHash)
	ks.keyHash = func(v T, scratch []byte) (uint32, []byte) {
		b, err := kc.Append(scratch, keyOf(v))
		if err != nil {
			// A key that cannot be encoded still needs a stable home.
			b = fmt.Appendf(scratch[:0], "%v", keyOf(v))
		}
		return state.HashKey(b), b
	}
	return &KeyedStream[K, T]{stream: ks, keyOf: keyOf, keyCodec: kc}
}

// Stream returns the keyed stream as a plain stream (partitioned by key).
func (k *KeyedStream[K, T]) Stream() *Stream[T] { return k.stream }

// KeyedProcessFunction processes the records of a keyed stream with access
// to the key, timestamps and timers.
type KeyedProcessFunction[K comparable, IN, OUT any] = operators.KeyedProcessFunction[K, IN, OUT]

// OperatorContext is what a user function that implements
// Open(*OperatorContext) error gets before the first record: its subtask,
// its keyed and operator state backends, and whether it was restored.
type OperatorContext = operators.Context

// KeyedContext is the context of a KeyedProcessFunction.
type KeyedContext[K comparable] = operators.KeyedContext[K]

// KeyedFlusher is implemented by a KeyedProcessFunction that combines
// records in memory before they reach keyed state: the operator has it
// write them into keyed state when the watermark advances and before a
// checkpoint (operators.KeyedFlusher).
type KeyedFlusher[K comparable] = operators.KeyedFlusher[K]

// ProcessFunc adapts a function to a KeyedProcessFunction.
type ProcessFunc[K comparable, IN, OUT any] = operators.ProcessFunc[K, IN, OUT]

// Process runs fn on every record of the keyed stream.
func Process[K comparable, IN, OUT any](ks *KeyedStream[K, IN], fn KeyedProcessFunction[K, IN, OUT], opts ...OpOption) *Stream[OUT] {
	s := ks.stream
	n, _ := newNode[OUT](s.env, "KeyedProcess", opts, true)
	n.Keyed, n.KeyCodec = true, ks.keyCodec
	s.env.bindQueryables(n, ks.keyCodec)
	n.Build = func(out any) (operators.Operator, []any, error) {
		op := operators.NewKeyedProcess(cloneFunction(fn), ks.keyOf, ks.keyCodec, out.(operators.Output[OUT]))
		return op, []any{op}, nil
	}
	connect(s, n, 0)
	return newStream[OUT](s.env, n)
}

// Reduce keeps a running reduction per key and emits the updated value for
// every record.
func Reduce[K comparable, T any](ks *KeyedStream[K, T], fn func(acc, v T) (T, error), opts ...OpOption) *Stream[T] {
	s := ks.stream
	n, _ := newNode[T](s.env, "Reduce", opts, true)
	n.Keyed, n.KeyCodec = true, ks.keyCodec
	vc := n.Out.Codec().(codec.Codec[T])
	n.Build = func(out any) (operators.Operator, []any, error) {
		op := operators.NewReduce(fn, ks.keyOf, ks.keyCodec, vc, out.(operators.Output[T]))
		return op, []any{op}, nil
	}
	connect(s, n, 0)
	return newStream[T](s.env, n)
}

// ConnectedStreams are two streams, possibly of different types, processed
// together by a two-input function.
type ConnectedStreams[A, B any] struct {
	a *Stream[A]
	b *Stream[B]
}

// Connect pairs two streams for CoProcess.
func Connect[A, B any](a *Stream[A], b *Stream[B]) *ConnectedStreams[A, B] {
	if a.env != b.env {
		a.env.addErr(fmt.Errorf("%w: Connect of streams from different environments", ErrInvalidOption))
	}
	return &ConnectedStreams[A, B]{a: a, b: b}
}

// CoProcessFunction processes the records of two connected streams.
type CoProcessFunction[A, B, OUT any] = operators.CoProcessFunction[A, B, OUT]

// CoContext is the context of a CoProcessFunction.
type CoContext = operators.CoContext

// CoProcess runs fn on the records of both connected streams.
func CoProcess[A, B, OUT any](c *ConnectedStreams[A, B], fn CoProcessFunction[A, B, OUT], opts ...OpOption) *Stream[OUT] {
	env := c.a.env
	n, _ := newNode[OUT](env, "CoProcess", opts, true)
	n.Build = func(out any) (operators.Operator, []any, error) {
		op := operators.NewCoProcess(cloneFunction(fn), out.(operators.Output[OUT]))
		return op, []any{op.Input1(), op.Input2()}, nil
	}
	connect(c.a, n, 0)
	connect(c.b, n, 1)
	return newStream[OUT](env, n)
}

// cloneFunction gives each subtask its own copy of a user function held
// by a struct pointer, as Flink deserialises one copy per subtask; other
// values are used as they are.
func cloneFunction[F any](fn F) F {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return fn
	}
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	out, ok := c.Interface().(F)
	if !ok {
		return fn
	}
	return out
}
