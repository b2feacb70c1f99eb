// Package bench holds the end-to-end benchmarks of the runtime: the keyed
// count (datagen -> keyBy -> count in a Go map -> discard), the
// same with struct records encoded by the default codec
// (BenchmarkKeyedCountStruct), a chain of maps and filters, and the
// exchange path. Run them with
//
//	go test -run '^$' -bench . -benchmem ./bench/
//
// Each benchmark runs one job of b.N records and reports records/s.
//
// BenchmarkStreamTableJoin is a stream-table join (package table) with a
// table of 1 M keys on RocksDB against the same join written by hand as a
// keyed co-process; bench/tablequery measures queries against a running
// job's table (in process and over the REST API). On our shared 2-core
// machine (load average 10-15 from other work while measuring; figures
// vary by a third from run to run):
//
//	go test -run '^$' -bench StreamTableJoin -benchtime 1000000x -count 2 ./bench/
//	  join=table             283 000, 411 000 records/s (both inputs)
//	  join=keyed-coprocess   286 000, 223 000 records/s
//	go run ./bench/tablequery [-rocksdb] [-via rest]   (1 000 queries/s, 100 000 keys, 20 000 records/s in)
//	  in process, heap       p50 15-18 us, p99 21-42 ms
//	  in process, RocksDB    p50 41-52 us, p99 250-600 ms
//	  REST, heap             p50 230 us
//
// A query waits for its task to finish the record (or the checkpoint's
// synchronous part) in progress; the tails are the machine's load and the
// checkpoints' synchronous parts (RocksDB flushes its memtables there).
package bench
