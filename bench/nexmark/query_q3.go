package main

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/state"
)

// Q3Result is a seller in one of the local states and an auction of
// theirs in category 10.
type Q3Result struct {
	Name, City, State string
	ID                int64 // the auction
}

// q3States are the states of query 3's sellers.
var q3States = map[string]bool{"OR": true, "ID": true, "CA": true}

// q3Category is the category of query 3's auctions.
const q3Category = 10

// Q3 is the local item suggestion: auctions of category 10 joined with
// their sellers living in OR, ID or CA (an inner join on seller = id, as
// Flink's regular join: no window, state kept per key). The filters run
// before the join, as Flink pushes them down; the join is a keyed
// co-process keyed by person id, with the person and the auctions that
// came before it in keyed state.
func Q3(events *sluice.Stream[Event]) *sluice.Stream[Q3Result] {
	persons := Persons(events, "q3-persons", func(p *Person) bool { return q3States[p.State] })
	auctions := Auctions(events, "q3-auctions", func(a *Auction) bool { return a.Category == q3Category })
	joined := sluice.ConnectKeyed(sluice.KeyBy(auctions, func(a Auction) int64 { return a.Seller }),
		sluice.KeyBy(persons, func(p Person) int64 { return p.ID }))
	return sluice.KeyedCoProcess(joined, sluice.KeyedCoProcessFunction[int64, Auction, Person, Q3Result](&q3Join{}),
		sluice.Name("q3-join"), sluice.UID("q3-join"), sluice.WithCodec(q3Codec))
}

// q3Person is what the join keeps of a seller.
type q3Person struct{ Name, City, State string }

var q3PersonCodec = newCodec(func(b []byte, p q3Person) []byte {
	return putStr(putStr(putStr(b, p.Name), p.City), p.State)
}, func(r *reader) q3Person { return q3Person{Name: r.str(), City: r.str(), State: r.str()} })

var q3Codec = newCodec(func(b []byte, v Q3Result) []byte {
	return putInt(putStr(putStr(putStr(b, v.Name), v.City), v.State), v.ID)
}, func(r *reader) Q3Result { return Q3Result{Name: r.str(), City: r.str(), State: r.str(), ID: r.int()} })

// q3Join joins the auctions of a seller with the seller: the person in a
// ValueState, the auctions that came before it in a ListState.
type q3Join struct {
	person  state.ValueState[q3Person]
	waiting state.ListState[int64]
}

func (j *q3Join) Open(ctx *sluice.OperatorContext) error {
	var err error
	if j.person, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[q3Person]{Name: "person", Codec: q3PersonCodec}); err != nil {
		return err
	}
	j.waiting, err = state.GetListState(ctx.KeyedState, state.ListStateDescriptor[int64]{Name: "waiting-auctions"})
	return err
}

// ProcessElement1 takes an auction: joined at once if its seller came,
// else kept for it.
func (j *q3Join) ProcessElement1(_ *sluice.KeyedContext[int64], a Auction, out sluice.Collector[Q3Result]) error {
	p, ok, err := j.person.Value()
	if err != nil {
		return err
	}
	if !ok {
		return j.waiting.Add(a.ID)
	}
	out.Collect(Q3Result{Name: p.Name, City: p.City, State: p.State, ID: a.ID})
	return nil
}

// ProcessElement2 takes a person: kept, and joined with the auctions
// that waited for it.
func (j *q3Join) ProcessElement2(_ *sluice.KeyedContext[int64], person Person, out sluice.Collector[Q3Result]) error {
	p := q3Person{Name: person.Name, City: person.City, State: person.State}
	if err := j.person.Update(p); err != nil {
		return err
	}
	ids, err := j.waiting.Get()
	if err != nil || len(ids) == 0 {
		return err
	}
	for _, id := range ids {
		out.Collect(Q3Result{Name: p.Name, City: p.City, State: p.State, ID: id})
	}
	return j.waiting.Clear()
}
