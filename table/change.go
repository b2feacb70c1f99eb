package table

// Change is one record of a table's changelog: the new value of Key, or
// with Delete its removal (a tombstone: Value is the zero value).
type Change[K comparable, V any] struct {
	Key    K
	Value  V
	Delete bool
}

// Upsert is the change that sets k to v.
func Upsert[K comparable, V any](k K, v V) Change[K, V] { return Change[K, V]{Key: k, Value: v} }

// Tombstone is the change that deletes k.
func Tombstone[K comparable, V any](k K) Change[K, V] { return Change[K, V]{Key: k, Delete: true} }

func changeKey[K comparable, V any](c Change[K, V]) K { return c.Key }

// ptr is &v when ok, else nil: how a join function is told that one side
// has no value.
func ptr[V any](v V, ok bool) *V {
	if !ok {
		return nil
	}
	return &v
}
