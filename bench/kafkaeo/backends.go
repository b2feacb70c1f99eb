package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/state"
)

// linked checks that every backend of list (comma separated values of
// state.backend.type) is in this build: hashmap always is, the others
// when their package registered them (rocksdb.go, unless the build has
// -tags norocksdb), so that a heap-only build refuses -backends rocksdb
// before it produces any input.
func linked(list string) error {
	for _, b := range strings.Split(list, ",") {
		if b == "" || b == "hashmap" || slices.Contains(state.BackendTypes(), b) {
			continue
		}
		return fmt.Errorf("state backend %q is not linked in this build (built with -tags norocksdb?); it runs %s",
			b, strings.Join(linkedBackends(), ", "))
	}
	return nil
}

// linkedBackends lists the backends of this build: hashmap, then those
// registered.
func linkedBackends() []string {
	return append([]string{"hashmap"}, slices.DeleteFunc(state.BackendTypes(), func(b string) bool { return b == "hashmap" })...)
}
