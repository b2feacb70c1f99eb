// Package bench holds the end-to-end benchmarks of the runtime: the keyed
// count (datagen -> keyBy -> count in a Go map -> discard), the
// same with struct records encoded by the default codec
// (BenchmarkKeyedCountStruct), a chain of maps and filters, and the
// exchange path. Run them with
//
//	go test -run '^$' -bench . -benchmem ./bench/
//
// Each benchmark runs one job of b.N records and reports records/s.
package bench
