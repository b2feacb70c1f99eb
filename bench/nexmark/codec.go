package main

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice"
)

// errCorrupt is returned (wrapped) when a record does not decode.
var errCorrupt = errors.New("nexmark: corrupt record")

// binCodec is a compact binary codec (varints and length-prefixed
// strings) from a pair of functions: the events and the queries' records
// cross network exchanges and live in keyed state, where the default JSON
// codec would cost more than the query.
type binCodec[T any] struct {
	enc func(b []byte, v T) []byte
	dec func(r *reader) T
}

func (c binCodec[T]) Append(dst []byte, v T) ([]byte, error) { return c.enc(dst, v), nil }

func (c binCodec[T]) Decode(src []byte) (T, error) {
	r := reader{b: src, src: src}
	v := c.dec(&r)
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d bytes left over", len(r.b))
	}
	if r.err != nil {
		var zero T
		return zero, fmt.Errorf("decode %T: %w: %w", zero, errCorrupt, r.err)
	}
	return v, nil
}

func newCodec[T any](enc func([]byte, T) []byte, dec func(*reader) T) sluice.Codec[T] {
	return binCodec[T]{enc: enc, dec: dec}
}

func putInt(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

func putStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// reader reads what putInt and putStr wrote; the first error sticks.
type reader struct {
	b   []byte
	err error
	// src is the whole record, and all a copy of it as a string, made at
	// the first non-empty str: the record's strings are parts of it, one
	// allocation per record instead of one per string (a bid has three).
	src []byte
	all string
}

func (r *reader) int() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errors.New("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) str() string {
	if r.err != nil {
		return ""
	}
	l, n := binary.Uvarint(r.b)
	if n <= 0 || uint64(len(r.b)-n) < l {
		r.err = errors.New("bad string length")
		return ""
	}
	if l == 0 {
		r.b = r.b[n:]
		return ""
	}
	if r.all == "" {
		r.all = string(r.src)
	}
	off := len(r.src) - len(r.b) + n
	r.b = r.b[n+int(l):]
	return r.all[off : off+int(l)]
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.err = errors.New("missing byte")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func encPerson(b []byte, p *Person) []byte {
	b = putInt(b, p.ID)
	b = putStr(b, p.Name)
	b = putStr(b, p.EmailAddress)
	b = putStr(b, p.CreditCard)
	b = putStr(b, p.City)
	b = putStr(b, p.State)
	b = putInt(b, p.DateTime)
	return putStr(b, p.Extra)
}

func decPerson(r *reader) *Person {
	return &Person{ID: r.int(), Name: r.str(), EmailAddress: r.str(), CreditCard: r.str(),
		City: r.str(), State: r.str(), DateTime: r.int(), Extra: r.str()}
}

func encAuction(b []byte, a *Auction) []byte {
	b = putInt(b, a.ID)
	b = putStr(b, a.ItemName)
	b = putStr(b, a.Description)
	b = putInt(b, a.InitialBid)
	b = putInt(b, a.Reserve)
	b = putInt(b, a.DateTime)
	b = putInt(b, a.Expires)
	b = putInt(b, a.Seller)
	b = putInt(b, a.Category)
	return putStr(b, a.Extra)
}

func decAuction(r *reader) *Auction {
	return &Auction{ID: r.int(), ItemName: r.str(), Description: r.str(), InitialBid: r.int(),
		Reserve: r.int(), DateTime: r.int(), Expires: r.int(), Seller: r.int(), Category: r.int(), Extra: r.str()}
}

func encBid(b []byte, v Bid) []byte {
	b = putInt(b, v.Auction)
	b = putInt(b, v.Bidder)
	b = putInt(b, v.Price)
	b = putStr(b, v.Channel)
	b = putStr(b, v.URL)
	b = putInt(b, v.DateTime)
	return putStr(b, v.Extra)
}

func decBid(r *reader) Bid {
	return Bid{Auction: r.int(), Bidder: r.int(), Price: r.int(), Channel: r.str(), URL: r.str(), DateTime: r.int(), Extra: r.str()}
}

// EventCodec encodes events: the kind, then the payload's fields.
var EventCodec = newCodec(func(b []byte, e Event) []byte {
	b = append(b, byte(e.Kind))
	switch e.Kind {
	case KindPerson:
		return encPerson(b, e.Person)
	case KindAuction:
		return encAuction(b, e.Auction)
	}
	return encBid(b, *e.Bid)
}, func(r *reader) Event {
	switch k := Kind(r.byte()); k {
	case KindPerson:
		return Event{Kind: k, Person: decPerson(r)}
	case KindAuction:
		return Event{Kind: k, Auction: decAuction(r)}
	case KindBid:
		b := decBid(r)
		return Event{Kind: k, Bid: &b}
	default:
		if r.err == nil {
			r.err = fmt.Errorf("unknown event kind %d", k)
		}
		return Event{}
	}
})

// PersonCodec and AuctionCodec encode persons and auctions.
var (
	PersonCodec  = newCodec(func(b []byte, p Person) []byte { return encPerson(b, &p) }, func(r *reader) Person { return *decPerson(r) })
	AuctionCodec = newCodec(func(b []byte, a Auction) []byte { return encAuction(b, &a) }, func(r *reader) Auction { return *decAuction(r) })
)

// BidCodec encodes bids.
var BidCodec = newCodec(encBid, decBid)

// intsCodec is the codec of a list of int64 (a state value).
var intsCodec = newCodec(func(b []byte, vs []int64) []byte {
	b = putInt(b, int64(len(vs)))
	for _, v := range vs {
		b = putInt(b, v)
	}
	return b
}, func(r *reader) []int64 {
	n := r.int()
	if r.err != nil || n < 0 || n > int64(len(r.b)) {
		r.err = errors.New("bad list length")
		return nil
	}
	vs := make([]int64, n)
	for i := range vs {
		vs[i] = r.int()
	}
	return vs
})
