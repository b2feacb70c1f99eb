package main

// Kind is the type of a Nexmark event, numbered as the event_type column
// of the Flink Nexmark source: 0 person, 1 auction, 2 bid.
type Kind uint8

// The three kinds of event.
const (
	KindPerson Kind = iota
	KindAuction
	KindBid
)

func (k Kind) String() string {
	switch k {
	case KindPerson:
		return "person"
	case KindAuction:
		return "auction"
	case KindBid:
		return "bid"
	}
	return "unknown"
}

// Person is a person who sells or bids.
type Person struct {
	ID           int64
	Name         string
	EmailAddress string
	CreditCard   string
	City         string
	State        string
	DateTime     int64 // event time, Unix ms
	Extra        string
}

// Auction is an item put up for auction by a seller.
type Auction struct {
	ID          int64
	ItemName    string
	Description string
	InitialBid  int64
	Reserve     int64
	DateTime    int64 // event time, Unix ms
	Expires     int64 // Unix ms
	Seller      int64
	Category    int64
	Extra       string
}

// Bid is a bid of a bidder on an auction, in cents.
type Bid struct {
	Auction  int64
	Bidder   int64
	Price    int64
	Channel  string
	URL      string
	DateTime int64 // event time, Unix ms
	Extra    string
}

// Event is one Nexmark event: exactly one of Person, Auction and Bid is
// set, as Kind says.
type Event struct {
	Kind    Kind
	Person  *Person
	Auction *Auction
	Bid     *Bid
}

// Timestamp is the event's time (its payload's DateTime), Unix ms.
func (e Event) Timestamp() int64 {
	switch e.Kind {
	case KindPerson:
		return e.Person.DateTime
	case KindAuction:
		return e.Auction.DateTime
	default:
		return e.Bid.DateTime
	}
}
