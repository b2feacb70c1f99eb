// Package integration holds Sluice's end-to-end tests against a real Apache
// Kafka broker. The tests take the broker's address from KAFKA_BROKERS
// (host:port, comma separated for several); `make test` starts a local
// broker with scripts/kafka and sets it. With KAFKA_BROKERS unset they skip,
// except under CI=true, where they fail: integration tests are never skipped
// in CI.
package integration
