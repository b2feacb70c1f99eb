package main

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestGeneratorProportions: every 50 consecutive ids hold 1 person, 3
// auctions and 46 bids; person and auction ids count up from 1000 with no
// gap; bids and auctions name persons and auctions that exist or come
// within the lead.
func TestGeneratorProportions(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Events, cfg.Rate = 5000, 1000
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[Kind]int64{}
	nextPerson, nextAuction := int64(firstPersonID), int64(firstAuctionID)
	for n := range cfg.Events {
		e := g.Event(n)
		kinds[e.Kind]++
		if e.Timestamp() != g.Timestamp(n) || e.Kind != g.KindOf(n) {
			t.Fatalf("event %d: timestamp %d kind %v, but Timestamp() %d KindOf() %v", n, e.Timestamp(), e.Kind, g.Timestamp(n), g.KindOf(n))
		}
		if want := cfg.BaseTime + n*1000/int64(cfg.Rate); e.Timestamp() != want {
			t.Fatalf("event %d at %d, want %d (rate %v/s)", n, e.Timestamp(), want, cfg.Rate)
		}
		switch e.Kind {
		case KindPerson:
			if e.Person.ID != nextPerson {
				t.Fatalf("event %d: person %d, want %d", n, e.Person.ID, nextPerson)
			}
			nextPerson++
		case KindAuction:
			if e.Auction.ID != nextAuction {
				t.Fatalf("event %d: auction %d, want %d", n, e.Auction.ID, nextAuction)
			}
			nextAuction++
			if s := e.Auction.Seller; s < firstPersonID || s >= nextPerson+personIDLead {
				t.Fatalf("event %d: seller %d beyond the persons so far (%d) and the lead", n, s, nextPerson)
			}
			if c := e.Auction.Category; c < firstCategoryID || c >= firstCategoryID+numCategories {
				t.Fatalf("event %d: category %d", n, c)
			}
			if e.Auction.Expires <= e.Auction.DateTime || e.Auction.Reserve < e.Auction.InitialBid {
				t.Fatalf("event %d: auction %+v", n, e.Auction)
			}
		case KindBid:
			if a := e.Bid.Auction; a < firstAuctionID || a >= nextAuction+auctionIDLead {
				t.Fatalf("event %d: bid on auction %d beyond the auctions so far (%d) and the lead", n, a, nextAuction)
			}
			if b := e.Bid.Bidder; b < firstPersonID || b >= nextPerson+personIDLead {
				t.Fatalf("event %d: bidder %d beyond the persons so far (%d) and the lead", n, b, nextPerson)
			}
			if e.Bid.Price < 100 || e.Bid.Channel == "" || e.Bid.URL == "" {
				t.Fatalf("event %d: bid %+v", n, e.Bid)
			}
		}
	}
	if want := (map[Kind]int64{KindPerson: 100, KindAuction: 300, KindBid: 4600}); !reflect.DeepEqual(kinds, want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}
}

// TestGeneratorDeterministic: the same seed gives the same events, in any
// order of generation; another seed other events.
func TestGeneratorDeterministic(t *testing.T) {
	cfg := DefaultConfig()
	a, _ := NewGenerator(cfg)
	b, _ := NewGenerator(cfg)
	cfg.Seed++
	c, _ := NewGenerator(cfg)
	differ := 0
	for n := int64(999); n >= 0; n-- {
		ea, eb, ec := a.Event(n), b.Event(n), c.Event(n)
		if !reflect.DeepEqual(ea, eb) {
			t.Fatalf("event %d differs between two generators of one configuration: %+v %+v", n, ea, eb)
		}
		if !reflect.DeepEqual(ea, ec) {
			differ++
		}
	}
	if differ < 900 {
		t.Errorf("only %d of 1000 events differ with another seed", differ)
	}
}

// TestGeneratorOutOfOrder: with groups of 100, the events of a group are
// a permutation of the in-order ones, so the timestamps are out of order
// by less than a group's span and every id appears once.
func TestGeneratorOutOfOrder(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Events, cfg.Rate, cfg.OutOfOrderGroupSize = 10_000, 1000, 100
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	inOrder := cfg
	inOrder.OutOfOrderGroupSize = 1
	h, _ := NewGenerator(inOrder)
	want := map[string]int{}
	got := map[string]int{}
	var maxTs, disorder int64
	late := 0
	for n := range cfg.Events {
		e := g.Event(n)
		ts := e.Timestamp()
		if ts < maxTs {
			late++
			disorder = max(disorder, maxTs-ts)
		}
		maxTs = max(maxTs, ts)
		got[string(must(EventCodec.Append(nil, e)))]++
		want[string(must(EventCodec.Append(nil, h.Event(n))))]++
	}
	if late == 0 {
		t.Fatal("no event is out of order")
	}
	if span := int64(100 * 1000 / cfg.Rate); disorder >= span {
		t.Errorf("events up to %d ms out of order, want less than a group's %d ms", disorder, span)
	}
	if !reflect.DeepEqual(got, want) {
		t.Error("the shuffled events are not the in-order events")
	}
	cfg.OutOfOrderGroupSize = 953 * 2
	if _, err := NewGenerator(cfg); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("group size 1906 (a multiple of 953, no permutation): %v, want ErrInvalidConfig", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestEventCodec: every kind of event survives the codec, and a cut
// record is refused.
func TestEventCodec(t *testing.T) {
	g, _ := NewGenerator(DefaultConfig())
	for n := range int64(200) {
		e := g.Event(n)
		b := must(EventCodec.Append(nil, e))
		back, err := EventCodec.Decode(b)
		if err != nil || !reflect.DeepEqual(back, e) {
			t.Fatalf("event %d: decoded %+v, %v; want %+v", n, back, err, e)
		}
		if _, err := EventCodec.Decode(b[:len(b)-1]); !errors.Is(err, errCorrupt) {
			t.Fatalf("event %d cut short: %v, want errCorrupt", n, err)
		}
	}
}

// TestConfigRefused: a bad configuration names the field.
func TestConfigRefused(t *testing.T) {
	for name, edit := range map[string]func(*Config){
		"Rate":                func(c *Config) { c.Rate = 0 },
		"Events":              func(c *Config) { c.Events = -1 },
		"OutOfOrderGroupSize": func(c *Config) { c.OutOfOrderGroupSize = 0 },
		"proportions":         func(c *Config) { c.BidProportion = 0 },
		"WallRate":            func(c *Config) { c.WallRate = -1 },
	} {
		c := DefaultConfig()
		edit(&c)
		_, err := NewGenerator(c)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want ErrInvalidConfig naming it", name, err)
		}
	}
}
