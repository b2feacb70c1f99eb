package main

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
)

// ErrInvalidConfig is returned (wrapped) for a generator configuration
// that cannot be generated; the message names the field.
var ErrInvalidConfig = errors.New("nexmark: invalid generator configuration")

// The first ids and category, as the Nexmark generator starts them so that
// queries find matches even on small inputs.
const (
	firstPersonID   = 1000
	firstAuctionID  = 1000
	firstCategoryID = 10
	numCategories   = 5

	// personIDLead and auctionIDLead are how many ids beyond the last one
	// generated a random pick may name: a bid or auction may refer to a
	// person or auction whose event comes a little later.
	personIDLead  = 10
	auctionIDLead = 10
	// hotBatch: a hot seller, bidder or auction is the first of the
	// latest batch of this many ids.
	hotBatch = 100

	hotChannelsRatio = 2
	numChannels      = 10_000
)

// Config is the generator's configuration. Field names follow the
// Nexmark configuration (Beam's NexmarkConfiguration, the Flink Nexmark
// source's options); DefaultConfig has their defaults.
type Config struct {
	// Events is the number of events (nexmark events.num).
	Events int64
	// Rate is the event rate in events per second of event time
	// (first-event.rate): event n happens at BaseTime + n/Rate. It sets
	// the timestamps, not how fast the source runs (see WallRate).
	Rate float64
	// WallRate limits the source to this many events per second of wall
	// time over all subtasks; 0 (the default) is as fast as it goes, as
	// the Flink Nexmark benchmark runs.
	WallRate float64
	// BaseTime is the time of event 0, Unix ms.
	BaseTime int64
	// Seed makes the events: the same seed, the same events.
	Seed uint64
	// OutOfOrderGroupSize is the size of the groups of consecutive events
	// whose timestamps (and ids) are shuffled among themselves: 1 keeps
	// the stream in order. It must not be a multiple of 953.
	OutOfOrderGroupSize int64

	// PersonProportion, AuctionProportion and BidProportion are the shares
	// of each kind (1:3:46).
	PersonProportion, AuctionProportion, BidProportion int64
	// NumActivePeople is how many of the latest persons auctions and bids
	// pick from.
	NumActivePeople int64
	// NumInFlightAuctions is how many of the latest auctions bids pick
	// from, and sets the average auction length.
	NumInFlightAuctions int64
	// HotAuctionRatio, HotSellersRatio, HotBiddersRatio: 1 - 1/ratio of
	// the bids (auctions) go to the hot auction (seller, bidder).
	HotAuctionRatio, HotSellersRatio, HotBiddersRatio int64
	// AvgPersonByteSize, AvgAuctionByteSize, AvgBidByteSize pad each kind
	// with an extra string to this average size.
	AvgPersonByteSize, AvgAuctionByteSize, AvgBidByteSize int
}

// DefaultConfig is the Nexmark defaults with the Flink benchmark's rate
// (10 M events/s of event time).
func DefaultConfig() Config {
	return Config{
		Events:              10_000_000,
		Rate:                10_000_000,
		BaseTime:            1_735_689_600_000, // 2025-01-01T00:00:00Z
		Seed:                1,
		OutOfOrderGroupSize: 1,
		PersonProportion:    1, AuctionProportion: 3, BidProportion: 46,
		NumActivePeople:     1000,
		NumInFlightAuctions: 100,
		HotAuctionRatio:     2, HotSellersRatio: 4, HotBiddersRatio: 4,
		AvgPersonByteSize: 200, AvgAuctionByteSize: 500, AvgBidByteSize: 100,
	}
}

func (c Config) validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("%w: %s is %v, must be %s", ErrInvalidConfig, field, v, want)
	}
	switch {
	case c.Events < 0:
		return bad("Events", c.Events, ">= 0")
	case !(c.Rate > 0) || math.IsInf(c.Rate, 0):
		return bad("Rate", c.Rate, "a finite number > 0")
	case c.WallRate < 0 || math.IsNaN(c.WallRate) || math.IsInf(c.WallRate, 0):
		return bad("WallRate", c.WallRate, "a finite number >= 0")
	case c.OutOfOrderGroupSize < 1 || c.OutOfOrderGroupSize%953 == 0:
		return bad("OutOfOrderGroupSize", c.OutOfOrderGroupSize, ">= 1 and not a multiple of 953")
	case c.PersonProportion < 1 || c.AuctionProportion < 1 || c.BidProportion < 1:
		return bad("proportions", fmt.Sprintf("%d:%d:%d", c.PersonProportion, c.AuctionProportion, c.BidProportion), "each >= 1")
	case c.NumActivePeople < 1:
		return bad("NumActivePeople", c.NumActivePeople, ">= 1")
	case c.NumInFlightAuctions < 1:
		return bad("NumInFlightAuctions", c.NumInFlightAuctions, ">= 1")
	case c.HotAuctionRatio < 1 || c.HotSellersRatio < 1 || c.HotBiddersRatio < 1:
		return bad("hot ratios", fmt.Sprintf("%d/%d/%d", c.HotAuctionRatio, c.HotSellersRatio, c.HotBiddersRatio), "each >= 1")
	}
	return nil
}

// Generator makes the events of a Config. Every event is a pure function
// of its event number (and the seed), so any subtask can generate any
// event, a restored source resumes at an event number, and the events do
// not depend on the parallelism. It is safe for concurrent use.
type Generator struct {
	cfg      Config
	total    int64
	delayUs  float64 // event time between two events, µs
	channels []channel
	hot      []channel
}

type channel struct{ name, url string }

// NewGenerator checks the configuration and returns its generator.
func NewGenerator(cfg Config) (*Generator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g := &Generator{
		cfg:     cfg,
		total:   cfg.PersonProportion + cfg.AuctionProportion + cfg.BidProportion,
		delayUs: 1e6 / cfg.Rate,
	}
	// The channels and their URLs are drawn once from the seed, as the
	// Nexmark generator draws a fixed table of them.
	r := newRNG(cfg.Seed, math.MaxUint64)
	for _, name := range []string{"Google", "Facebook", "Baidu", "Apple"} {
		g.hot = append(g.hot, channel{name, baseURL(&r)})
	}
	g.channels = make([]channel, numChannels)
	for i := range g.channels {
		u := baseURL(&r)
		if r.intn(10) > 0 {
			u += "&channel_id=" + strconv.FormatInt(int64(bits.Reverse32(uint32(i))&math.MaxInt32), 10)
		}
		g.channels[i] = channel{"channel-" + strconv.Itoa(i), u}
	}
	return g, nil
}

// Config returns the generator's configuration.
func (g *Generator) Config() Config { return g.cfg }

// adjusted is the event number whose id and time event n carries: n
// itself in order, else n shuffled within its out-of-order group (the
// Nexmark generator's permutation: offset n*953 mod the group size).
func (g *Generator) adjusted(n int64) int64 {
	s := g.cfg.OutOfOrderGroupSize
	if s == 1 {
		return n
	}
	return n/s*s + (n%s)*953%s
}

// timeOf is the event time of event number m, Unix ms.
func (g *Generator) timeOf(m int64) int64 {
	return g.cfg.BaseTime + int64(float64(m)*g.delayUs)/1000
}

// Timestamp is the event time of the n-th event emitted, Unix ms.
func (g *Generator) Timestamp(n int64) int64 { return g.timeOf(g.adjusted(n)) }

// KindOf is the kind of the n-th event emitted.
func (g *Generator) KindOf(n int64) Kind { return g.kindOfID(g.adjusted(n)) }

func (g *Generator) kindOfID(id int64) Kind {
	switch rem := id % g.total; {
	case rem < g.cfg.PersonProportion:
		return KindPerson
	case rem < g.cfg.PersonProportion+g.cfg.AuctionProportion:
		return KindAuction
	}
	return KindBid
}

// Event is the n-th event emitted (n from 0).
func (g *Generator) Event(n int64) Event {
	id := g.adjusted(n)
	ts := g.timeOf(id)
	r := newRNG(g.cfg.Seed, uint64(id))
	switch g.kindOfID(id) {
	case KindPerson:
		return Event{Kind: KindPerson, Person: g.person(id, ts, &r)}
	case KindAuction:
		return Event{Kind: KindAuction, Auction: g.auction(id, ts, &r)}
	}
	return Event{Kind: KindBid, Bid: g.bid(id, ts, &r)}
}

// lastPerson is the base-0 id of the latest person at event id: this
// event's own if it is a person.
func (g *Generator) lastPerson(id int64) int64 {
	epoch, off := id/g.total, id%g.total
	return epoch*g.cfg.PersonProportion + min(off, g.cfg.PersonProportion-1)
}

// lastAuction is the base-0 id of the latest auction at event id: this
// event's own if it is an auction.
func (g *Generator) lastAuction(id int64) int64 {
	p, a := g.cfg.PersonProportion, g.cfg.AuctionProportion
	epoch, off := id/g.total, id%g.total
	switch {
	case off < p: // a person: the last auction of the previous epoch
		epoch--
		off = a - 1
	case off >= p+a: // a bid: the last auction of this epoch
		off = a - 1
	default:
		off -= p
	}
	return epoch*a + off
}

// randomPerson picks a base-0 person id among the active ones, a few ahead
// of the latest allowed.
func (g *Generator) randomPerson(id int64, r *rng) int64 {
	people := g.lastPerson(id) + 1
	active := min(people, g.cfg.NumActivePeople)
	return people - active + r.intn(active+personIDLead)
}

// randomAuction picks a base-0 auction id among the in-flight ones, a few
// ahead of the latest allowed.
func (g *Generator) randomAuction(id int64, r *rng) int64 {
	last := g.lastAuction(id)
	lo := max(last-g.cfg.NumInFlightAuctions, 0)
	return lo + r.intn(last-lo+1+auctionIDLead)
}

var (
	usStates   = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities   = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	firstNames = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames  = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
)

func (g *Generator) person(id, ts int64, r *rng) *Person {
	p := &Person{ID: g.lastPerson(id) + firstPersonID, DateTime: ts}
	p.Name = firstNames[r.intn(int64(len(firstNames)))] + " " + lastNames[r.intn(int64(len(lastNames)))]
	p.EmailAddress = r.str(7) + "@" + r.str(5) + ".com"
	var cc [19]byte
	for i := range 4 {
		if i > 0 {
			cc[i*5-1] = ' '
		}
		v := r.intn(10000)
		for j := 3; j >= 0; j-- {
			cc[i*5+j] = byte('0' + v%10)
			v /= 10
		}
	}
	p.CreditCard = string(cc[:])
	p.City = usCities[r.intn(int64(len(usCities)))]
	p.State = usStates[r.intn(int64(len(usStates)))]
	size := 8 + len(p.Name) + len(p.EmailAddress) + len(p.CreditCard) + len(p.City) + len(p.State)
	p.Extra = r.extra(size, g.cfg.AvgPersonByteSize)
	return p
}

func (g *Generator) auction(id, ts int64, r *rng) *Auction {
	a := &Auction{ID: g.lastAuction(id) + firstAuctionID, DateTime: ts}
	if r.intn(g.cfg.HotSellersRatio) > 0 {
		a.Seller = g.lastPerson(id) / hotBatch * hotBatch
	} else {
		a.Seller = g.randomPerson(id, r)
	}
	a.Seller += firstPersonID
	a.Category = firstCategoryID + r.intn(numCategories)
	a.InitialBid = r.price()
	// The length averages the time until NumInFlightAuctions more auctions
	// are generated.
	ahead := g.cfg.NumInFlightAuctions * g.total / g.cfg.AuctionProportion
	horizon := g.timeOf(id+ahead) - ts
	a.Expires = ts + 1 + r.intn(max(2*horizon, 1))
	a.ItemName = r.str(20)
	a.Description = r.str(100)
	a.Reserve = a.InitialBid + r.price()
	size := 8 + len(a.ItemName) + len(a.Description) + 8 + 8 + 8 + 8 + 8
	a.Extra = r.extra(size, g.cfg.AvgAuctionByteSize)
	return a
}

func (g *Generator) bid(id, ts int64, r *rng) *Bid {
	b := &Bid{DateTime: ts}
	if r.intn(g.cfg.HotAuctionRatio) > 0 {
		b.Auction = g.lastAuction(id) / hotBatch * hotBatch
	} else {
		b.Auction = g.randomAuction(id, r)
	}
	b.Auction += firstAuctionID
	if r.intn(g.cfg.HotBiddersRatio) > 0 {
		// The second of the batch, so hot bidders are not hot sellers.
		b.Bidder = g.lastPerson(id)/hotBatch*hotBatch + 1
	} else {
		b.Bidder = g.randomPerson(id, r)
	}
	b.Bidder += firstPersonID
	b.Price = r.price()
	var ch channel
	if r.intn(hotChannelsRatio) > 0 {
		ch = g.hot[r.intn(int64(len(g.hot)))]
	} else {
		ch = g.channels[r.intn(numChannels)]
	}
	b.Channel, b.URL = ch.name, ch.url
	b.Extra = r.extra(8+8+8+8, g.cfg.AvgBidByteSize)
	return b
}

func baseURL(r *rng) string {
	return "https://www.nexmark.com/" + r.strFill(5, '_') + "/" + r.strFill(5, '_') + "/" + r.strFill(5, '_') + "/item.htm?query=1"
}

// rng is SplitMix64, seeded per event from the seed and the event id, so
// that each event's fields are independent of every other event's.
type rng struct{ s uint64 }

func newRNG(seed, id uint64) rng {
	r := rng{s: seed*0x9e3779b97f4a7c15 ^ id}
	r.next()
	return r
}

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// intn returns a number in [0, n), n > 0.
func (r *rng) intn(n int64) int64 {
	hi, _ := bits.Mul64(r.next(), uint64(n))
	return int64(hi)
}

func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

// price is a price in cents, log-uniform from $1 to $1 M.
func (r *rng) price() int64 { return int64(math.Round(math.Pow(10, r.float()*6) * 100)) }

// str is a string of 3 to max-1 letters with a space now and then,
// trimmed.
func (r *rng) str(max int) string { return r.strFill(max, ' ') }

func (r *rng) strFill(max int, fill byte) string {
	n := 3 + r.intn(int64(max-3))
	b := make([]byte, n)
	for i := range b {
		if r.intn(13) == 0 {
			b[i] = fill
		} else {
			b[i] = byte('a' + r.intn(26))
		}
	}
	if fill == ' ' {
		for len(b) > 0 && b[0] == ' ' {
			b = b[1:]
		}
		for len(b) > 0 && b[len(b)-1] == ' ' {
			b = b[:len(b)-1]
		}
	}
	return string(b)
}

// exact is a string of exactly n letters, thirteen from each draw.
func (r *rng) exact(n int) string {
	b := make([]byte, n)
	var v uint64
	left := 0
	for i := range b {
		if left == 0 {
			v, left = r.next(), 13
		}
		b[i] = byte('a' + v%26)
		v /= 26
		left--
	}
	return string(b)
}

// extra pads a record of size bytes to avg bytes on average (+-20%).
func (r *rng) extra(size, avg int) string {
	if size > avg {
		return ""
	}
	avg -= size
	delta := int(math.Round(float64(avg) * 0.2))
	n := avg - delta
	if delta > 0 {
		n += int(r.intn(int64(2 * delta)))
	}
	return r.exact(n)
}
