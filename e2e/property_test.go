package e2e

import (
	"flag"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
)

var (
	seedFlag      = flag.Int64("seed", 0, "base seed of TestRandomPipelines (0: time-based)")
	pipelinesFlag = flag.Int("pipelines", 36, "number of random pipelines TestRandomPipelines runs")
)

// countBase separates the key from the running count in the value a keyed
// count emits: key*countBase + count.
const countBase = 1 << 20

type pkind int

const (
	pSource pkind = iota
	pMap
	pFilter
	pFlatMap
	pCount  // KeyBy + Process with a running count per key
	pReduce // Map to key*countBase+1, KeyBy, Reduce adding 1
	pUnion
)

var pkindNames = [...]string{"source", "map", "filter", "flatmap", "count", "reduce", "union"}

type partitioning int

const (
	partDefault partitioning = iota
	partRebalance
	partBroadcast
	partForward
)

var partNames = [...]string{"", ".Rebalance()", ".Broadcast()", ".Forward()"}

// pnode is one operator of a random pipeline: both the recipe the API
// builds and the function the sequential evaluation applies.
type pnode struct {
	id      int
	kind    pkind
	in      []*pnode
	par     int // 0: the environment's default
	part    partitioning
	noChain bool
	a, b    int64
	values  []int64 // source
	datagen bool    // source: a bounded datagen instead of a slice
}

func nonNeg(v, m int64) int64 { return ((v % m) + m) % m }

func (n *pnode) mapFn(v int64) int64   { return v*n.a + n.b }
func (n *pnode) filterFn(v int64) bool { return nonNeg(v, n.a) != n.b }
func (n *pnode) keyOf(v int64) int64   { return nonNeg(v, n.a) }
func (n *pnode) flatMapFn(v int64, emit func(int64)) {
	emit(v)
	if nonNeg(v, 3) == 0 {
		emit(v + n.b)
	}
	if nonNeg(v, 5) == 1 {
		emit(v - n.b)
	}
}

// pipeline is a random DAG of pnodes ending in a sink.
type pipeline struct {
	rng      *rand.Rand
	nodes    []*pnode
	envPar   int
	chaining bool
	sinkPar  int
	sinkPart partitioning
	root     *pnode
	opts     []sluice.Option
	optDesc  string
}

func (p *pipeline) resolvedPar(n *pnode) int {
	if n.par == 0 {
		return p.envPar
	}
	return n.par
}

// producers returns the operators a node's input edges come from (a union
// is not an operator: its inputs are).
func producers(in []*pnode) []*pnode {
	var out []*pnode
	for _, n := range in {
		if n.kind == pUnion {
			out = append(out, producers(n.in)...)
		} else {
			out = append(out, n)
		}
	}
	return out
}

func (p *pipeline) add(n *pnode) *pnode {
	n.id = len(p.nodes)
	p.nodes = append(p.nodes, n)
	return n
}

func (p *pipeline) randPar() int {
	if p.rng.Intn(4) == 0 {
		return 0
	}
	return 1 + p.rng.Intn(4)
}

// choosePart picks a partitioning valid for an operator of parallelism par
// reading from in.
func (p *pipeline) choosePart(in []*pnode, par int) partitioning {
	for {
		switch pt := partitioning(p.rng.Intn(4)); pt {
		case partForward:
			ok := true
			for _, prod := range producers(in) {
				ok = ok && p.resolvedPar(prod) == par
			}
			if ok {
				return pt
			}
		case partBroadcast:
			if p.rng.Intn(3) == 0 { // rarer: it multiplies the records
				return pt
			}
		default:
			return pt
		}
	}
}

func (p *pipeline) source() *pnode {
	n := &pnode{kind: pSource, par: p.randPar(), datagen: p.rng.Intn(3) == 0}
	size := p.rng.Intn(300)
	if p.rng.Intn(10) == 0 {
		size = 0
	}
	if n.datagen {
		n.a, n.b = int64(1+p.rng.Intn(7)), int64(p.rng.Intn(100))
		for i := range int64(size) {
			n.values = append(n.values, datagenValue(n.a, n.b, i))
		}
	} else {
		for range size {
			n.values = append(n.values, int64(p.rng.Intn(2001)-1000))
		}
	}
	return p.add(n)
}

func datagenValue(a, b, i int64) int64 { return (i*a + b) % 997 }

// gen makes a random sub-pipeline of the given depth; it sometimes reuses
// an existing node, which then feeds several operators.
func (p *pipeline) gen(depth int) *pnode {
	if len(p.nodes) > 0 && p.rng.Intn(6) == 0 {
		cand := p.nodes[p.rng.Intn(len(p.nodes))]
		if cand.kind != pUnion {
			return cand
		}
	}
	if depth == 0 || p.rng.Intn(5) == 0 {
		return p.source()
	}
	if p.rng.Intn(5) == 0 {
		u := &pnode{kind: pUnion}
		for range 2 + p.rng.Intn(2) {
			u.in = append(u.in, p.gen(depth-1))
		}
		return p.add(u)
	}
	in := p.gen(depth - 1)
	n := &pnode{in: []*pnode{in}, par: p.randPar(), noChain: p.rng.Intn(5) == 0}
	switch p.rng.Intn(5) {
	case 0:
		n.kind, n.a, n.b = pMap, int64(1+p.rng.Intn(3)), int64(p.rng.Intn(11)-5)
	case 1:
		n.kind, n.a = pFilter, int64(2+p.rng.Intn(4))
		n.b = int64(p.rng.Intn(int(n.a)))
	case 2:
		n.kind, n.b = pFlatMap, int64(1+p.rng.Intn(9))
	case 3:
		n.kind, n.a = pCount, int64(1+p.rng.Intn(20))
	case 4:
		n.kind, n.a = pReduce, int64(1+p.rng.Intn(20))
	}
	if n.kind != pCount && n.kind != pReduce {
		n.part = p.choosePart(n.in, p.resolvedPar(n))
	} else if n.kind == pReduce {
		n.part = p.choosePart(n.in, p.resolvedPar(n)) // of its leading Map
	}
	return p.add(n)
}

func newPipeline(seed int64) *pipeline {
	p := &pipeline{rng: rand.New(rand.NewSource(seed))}
	p.envPar = 1 + p.rng.Intn(4)
	p.chaining = p.rng.Intn(4) != 0
	p.opts = []sluice.Option{sluice.WithParallelism(p.envPar), sluice.WithChaining(p.chaining)}
	var desc []string
	desc = append(desc, fmt.Sprintf("parallelism=%d chaining=%v", p.envPar, p.chaining))
	if p.rng.Intn(3) == 0 {
		size := 64 << p.rng.Intn(6)
		p.opts = append(p.opts, sluice.WithBufferSize(size))
		desc = append(desc, fmt.Sprintf("buffer=%dB", size))
	}
	if p.rng.Intn(3) == 0 {
		p.opts = append(p.opts, sluice.WithBufferTimeout(0))
		desc = append(desc, "timeout=0")
	}
	if p.rng.Intn(4) == 0 {
		ex, fl := 1+p.rng.Intn(2), p.rng.Intn(3)
		p.opts = append(p.opts, sluice.WithExclusiveBuffers(ex), sluice.WithFloatingBuffers(fl))
		desc = append(desc, fmt.Sprintf("exclusive=%d floating=%d", ex, fl))
	}
	p.optDesc = strings.Join(desc, " ")
	p.root = p.gen(1 + p.rng.Intn(5))
	p.sinkPar = p.randPar()
	p.sinkPart = p.choosePart([]*pnode{p.root}, p.resolvedPar(&pnode{par: p.sinkPar}))
	return p
}

func (p *pipeline) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", p.optDesc)
	for _, n := range p.nodes {
		var ins []string
		for _, i := range n.in {
			ins = append(ins, fmt.Sprintf("n%d", i.id))
		}
		fmt.Fprintf(&b, "  n%d = %s(%s)%s p=%d a=%d b=%d noChain=%v", n.id, pkindNames[n.kind], strings.Join(ins, ","), partNames[n.part], n.par, n.a, n.b, n.noChain)
		if n.kind == pSource {
			fmt.Fprintf(&b, " datagen=%v len=%d", n.datagen, len(n.values))
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "  sink(n%d)%s p=%d", p.root.id, partNames[p.sinkPart], p.sinkPar)
	return b.String()
}

// eval is the plain sequential evaluation of the same functions.
func (p *pipeline) eval() []int64 {
	memo := map[*pnode][]int64{}
	var ev func(n *pnode) []int64
	input := func(in []*pnode, part partitioning, par int) []int64 {
		var out []int64
		for _, i := range in {
			out = append(out, ev(i)...)
		}
		if part == partBroadcast {
			var rep []int64
			for _, v := range out {
				for range par {
					rep = append(rep, v)
				}
			}
			out = rep
		}
		return out
	}
	ev = func(n *pnode) []int64 {
		if r, ok := memo[n]; ok {
			return r
		}
		var out []int64
		switch n.kind {
		case pSource:
			out = n.values
		case pUnion:
			out = input(n.in, partDefault, 0)
		case pMap:
			for _, v := range input(n.in, n.part, p.resolvedPar(n)) {
				out = append(out, n.mapFn(v))
			}
		case pFilter:
			for _, v := range input(n.in, n.part, p.resolvedPar(n)) {
				if n.filterFn(v) {
					out = append(out, v)
				}
			}
		case pFlatMap:
			for _, v := range input(n.in, n.part, p.resolvedPar(n)) {
				n.flatMapFn(v, func(u int64) { out = append(out, u) })
			}
		case pCount, pReduce:
			part := partDefault
			if n.kind == pReduce {
				part = n.part
			}
			counts := map[int64]int64{}
			for _, v := range input(n.in, part, p.resolvedPar(n)) {
				k := n.keyOf(v)
				counts[k]++
				out = append(out, k*countBase+counts[k])
			}
		}
		memo[n] = out
		return out
	}
	return input([]*pnode{p.root}, p.sinkPart, p.resolvedPar(&pnode{par: p.sinkPar}))
}

// size is the number of records every operator handles, to keep the
// random pipelines small.
func (p *pipeline) size() int {
	total := len(p.eval())
	for _, n := range p.nodes {
		sub := &pipeline{nodes: p.nodes, envPar: p.envPar, root: n, sinkPar: 1}
		total += len(sub.eval())
	}
	return total
}

func partition[T any](s *sluice.Stream[T], pt partitioning) *sluice.Stream[T] {
	switch pt {
	case partRebalance:
		return s.Rebalance()
	case partBroadcast:
		return s.Broadcast()
	case partForward:
		return s.Forward()
	}
	return s
}

// keyedCounter counts records per key and checks that each key reached
// the subtask that owns its key group.
type keyedCounter struct {
	mod    int64
	counts map[int64]int64
	ctx    *operators.Context
}

func (c *keyedCounter) Open(ctx *operators.Context) error {
	c.counts = map[int64]int64{}
	c.ctx = ctx
	return nil
}

func (c *keyedCounter) ProcessElement(ctx *sluice.KeyedContext[int64], v int64, out sluice.Collector[int64]) error {
	k := ctx.Key()
	if k != nonNeg(v, c.mod) {
		return fmt.Errorf("record %d has key %d in its context", v, k)
	}
	if want := ownerOf(k, c.ctx.MaxParallelism, c.ctx.Parallelism); want != c.ctx.Subtask {
		return fmt.Errorf("key %d reached subtask %d, its key group belongs to %d", k, c.ctx.Subtask, want)
	}
	c.counts[k]++
	out.Collect(k*countBase + c.counts[k])
	return nil
}

// ownerOf is the subtask that owns an int64 key: Flink's assignment of the
// key group of the key's encoded bytes.
func ownerOf(key int64, maxPar, par int) int {
	b, _ := codec.Int[int64]{}.Append(nil, key)
	return state.OperatorIndexFor(state.KeyGroupFor(b, maxPar), maxPar, par)
}

func (p *pipeline) build(env *sluice.Environment) *sink.Collect[int64] {
	streams := map[*pnode]*sluice.Stream[int64]{}
	var build func(n *pnode) *sluice.Stream[int64]
	input := func(n *pnode) *sluice.Stream[int64] {
		var ins []*sluice.Stream[int64]
		for _, i := range n.in {
			ins = append(ins, build(i))
		}
		if len(ins) == 1 {
			return ins[0]
		}
		return sluice.Union(ins[0], ins[1:]...)
	}
	build = func(n *pnode) *sluice.Stream[int64] {
		if s, ok := streams[n]; ok {
			return s
		}
		name := fmt.Sprintf("n%d-%s", n.id, pkindNames[n.kind])
		opts := []sluice.OpOption{sluice.Name(name)}
		if n.par != 0 {
			opts = append(opts, sluice.Parallelism(n.par))
		}
		if n.noChain {
			opts = append(opts, sluice.DisableChaining())
		}
		var s *sluice.Stream[int64]
		switch n.kind {
		case pSource:
			var src source.Source[int64]
			if n.datagen {
				a, b := n.a, n.b
				src = source.NewDatagen(func(i int64) int64 { return datagenValue(a, b, i) }, source.DatagenCount(int64(len(n.values))))
			} else {
				src = source.FromSlice(n.values)
			}
			s = sluice.FromSource(env, src, sluice.NoWatermarks[int64](), name, opts[1:]...)
		case pUnion:
			s = input(n)
		case pMap:
			s = sluice.Map(partition(input(n), n.part), func(v int64) (int64, error) { return n.mapFn(v), nil }, opts...)
		case pFilter:
			s = sluice.Filter(partition(input(n), n.part), func(v int64) (bool, error) { return n.filterFn(v), nil }, opts...)
		case pFlatMap:
			s = sluice.FlatMap(partition(input(n), n.part), func(v int64, out sluice.Collector[int64]) error {
				n.flatMapFn(v, out.Collect)
				return nil
			}, opts...)
		case pCount:
			ks := sluice.KeyBy(input(n), n.keyOf)
			s = sluice.Process[int64, int64, int64](ks, &keyedCounter{mod: n.a}, opts...)
		case pReduce:
			mopts := []sluice.OpOption{sluice.Name(name + "-key")}
			if n.par != 0 {
				mopts = append(mopts, sluice.Parallelism(n.par))
			}
			keyed := sluice.Map(partition(input(n), n.part), func(v int64) (int64, error) {
				return n.keyOf(v)*countBase + 1, nil
			}, mopts...)
			ks := sluice.KeyBy(keyed, func(v int64) int64 { return v / countBase })
			s = sluice.Reduce(ks, func(acc, v int64) (int64, error) {
				if acc/countBase != v/countBase {
					return 0, fmt.Errorf("reduce of key %d got a record of key %d", acc/countBase, v/countBase)
				}
				return acc + 1, nil
			}, opts...)
		}
		streams[n] = s
		return s
	}
	out := sink.NewCollect[int64]()
	var sopts []sluice.OpOption
	if p.sinkPar != 0 {
		sopts = append(sopts, sluice.Parallelism(p.sinkPar))
	}
	sluice.SinkTo(partition(build(p.root), p.sinkPart), out, append(sopts, sluice.Name("sink"))...)
	return out
}

// TestRandomPipelines: random pipelines of maps, filters, flat maps, keyed
// counts and reduces, unions and fan-outs, with random parallelisms,
// partitionings, chaining and network settings, give the same multiset of
// results as a sequential evaluation of the same functions.
func TestRandomPipelines(t *testing.T) {
	base := *seedFlag
	if base == 0 {
		base = time.Now().UnixNano() % 1_000_000_007
	}
	t.Logf("base seed %d (rerun one pipeline with -run 'TestRandomPipelines' -seed=<its seed> -pipelines=1)", base)
	for i := range int64(*pipelinesFlag) {
		seed := base + i
		var p *pipeline
		for attempt := int64(0); ; attempt++ {
			p = newPipeline(seed + attempt*1_000_003)
			if p.size() <= 20_000 {
				break
			}
		}
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			want := p.eval()
			env := newEnv(p.opts...)
			out := p.build(env)
			if err := execute(t, env); err != nil {
				t.Fatalf("pipeline:\n%s\njob failed: %v", p, err)
			}
			if d := sameMultiset(out.Values(), want); d != "" {
				t.Fatalf("pipeline:\n%s\n%s", p, d)
			}
		})
	}
}
