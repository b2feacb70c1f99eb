package filesink

import (
	"errors"
	"testing"
)

// FuzzParseCommittable: the file sink's committable decoder never panics;
// what it refuses wraps ErrInvalidCommittable; what it accepts names
// plain files (nothing a commit could move out of the sink's directory)
// and encodes back to a committable that parses the same.
func FuzzParseCommittable(f *testing.F) {
	c := Committable{Version: committableVersion, Subtask: 3, CheckpointID: 12, Seq: 1, InProgress: "part-3-abc.inprogress",
		Final: finalName(3, 12, 1), Size: int64(headerLen + footerLen + 10), CRC32C: 0xdeadbeef, Records: 2}
	b, err := c.encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add([]byte(`{"version":1,"in_progress":"../x","final":"part-0-0-0","size":100}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCommittable(b)
		if err != nil {
			if !errors.Is(err, ErrInvalidCommittable) {
				t.Fatalf("error %v does not wrap ErrInvalidCommittable", err)
			}
			return
		}
		if !isPlainName(c.InProgress) || !isPlainName(c.Final) {
			t.Fatalf("accepted names that are not plain: %+v", c)
		}
		enc, err := c.encode()
		if err != nil {
			t.Fatal(err)
		}
		if again, err := ParseCommittable(enc); err != nil || again != c {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, c)
		}
	})
}
