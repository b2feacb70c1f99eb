package codec_test

import (
	"fmt"

	"github.com/sluicehq/sluice/codec"
)

// Order is a record type of a pipeline.
type Order struct {
	ID    string `json:"id"`
	Cents int64  `json:"cents"`
}

// A codec turns a value into bytes and back. Records, keyed state and
// window contents whose type is given no codec use codec.Default: the
// built-in codecs for []byte, string and integers, and Binary (CBOR,
// honouring `json` tags) for structs. Give a codec where the bytes are
// read by something else: a Kafka topic's JSON (codec.JSON), or a Schema
// Registry serde (formats/avro, formats/protobuf, formats/jsonschema).
func Example() {
	// [start codecs]
	orders := codec.JSON[Order]{} // for a topic of JSON orders
	b, err := orders.Append(nil, Order{ID: "o-1", Cents: 1250})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))

	state := codec.Default[Order]() // what keyed state of Order uses when its descriptor names no codec
	b, _ = state.Append(nil, Order{ID: "o-1", Cents: 1250})
	back, err := state.Decode(b)
	fmt.Println(back, err)
	// [end codecs]

	// Output:
	// {"id":"o-1","cents":1250}
	// {o-1 1250} <nil>
}
