package storage

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/checkpoint/snapshot"
)

// FuzzDecodeJobResult: a job result file's decoder never panics; what it
// refuses wraps ErrCorrupt; what it accepts is a terminal result that
// writes back to a file that reads the same.
func FuzzDecodeJobResult(f *testing.F) {
	for _, r := range []JobResult{
		{Status: ResultFinished, RunID: "0123456789abcdef", EndTimestamp: 1_700_000_000_000},
		{Status: ResultFailed, RunID: "r", Error: "boom", EndTimestamp: -1, Savepoint: "s3://b/sp-1"},
		{Status: ResultCanceled},
	} {
		body, err := json.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		data := snapshot.Frame(body, jobResultMagic)
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	f.Add([]byte{})
	f.Add([]byte(jobResultMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := decodeJobResult(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		body, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeJobResult(snapshot.Frame(body, jobResultMagic))
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, r)
		}
	})
}
