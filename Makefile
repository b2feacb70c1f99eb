# Sluice: `make demo` runs the main example, `make test` runs every test.
# Both install what they need when it is missing (scripts/deps).

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO ?= go
# go.mod needs Go 1.27.3, the project's one toolchain: the go command fetches
# it from the module proxy the first time (about 76 MB). A machine whose own
# Go is older (with GOTOOLCHAIN=local in its go env) would refuse the module,
# so every recipe runs with it, as .ci/run and scripts/* do.
export GOTOOLCHAIN ?= go1.27.3
# Unit test flags. Every unit package runs with the race detector; the
# runtime, runtime/network and checkpoint packages must: their
# concurrency is what the race detector checks.
UNIT_FLAGS ?= -race -timeout 15m
INTEGRATION_FLAGS ?= -race -count=1 -timeout 20m
# `make bench BENCH=Exchange BENCH_PKGS=./runtime/...`
BENCH ?= .
BENCH_PKGS ?= ./...
BENCH_FLAGS ?= -benchmem
BENCH_OUT ?= bench.txt

# Every package but the integration tests, which need a broker. Both the unit
# and the integration tests run with a local S3 server up (scripts/with-s3);
# the integration tests with a Schema Registry too (scripts/with-registry).
UNIT_PKGS = $$($(GO) list ./... | grep -v '/integration')
# Modules of their own inside the repository, so that the main module (and
# every job binary) links none of their dependencies: kafkacontainer brings
# testcontainers and the Docker client. They are vetted, linted and tested
# with the rest. govulncheck runs on the main module only: the Docker
# client's module carries an advisory for the Docker daemon (GO-2026-4887,
# no fixed version) that a test's client does not reach.
SUBMODULES = sluicetest/kafkatest/kafkacontainer

# staticcheck and govulncheck at the versions scripts/deps pins and installs
# into $(go env GOPATH)/bin (staticcheck.conf says which checks are off and
# why). govulncheck reads the vulnerability database that scripts/deps copies
# to VULNDB from the module proxy, since vuln.go.dev is out of CI's reach.
STATICCHECK ?= $(shell $(GO) env GOPATH)/bin/staticcheck
GOVULNCHECK ?= $(shell $(GO) env GOPATH)/bin/govulncheck
VULNDB ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/sluice/vulndb
export VULNDB

# `make fuzz` fuzzes each decoder of checkpoint data (package:FuzzTarget) for
# FUZZTIME. An input that fails is written to the package's testdata/fuzz,
# where plain `go test` runs it from then on; the corpus the fuzzer grows is
# kept in the Go build cache, so later runs go on from it.
# The budgets are execution counts, not durations, so that the work (and
# CI's time) is the same on a loaded machine as on a quiet one. A target
# may carry its own budget (package:FuzzTarget:budget). The decoders of the
# control plane (./cluster/control:FuzzReadFrame), the HA pointer
# (./cluster/ha:FuzzDecodePointer) and the RocksDB incremental handle
# (./state/rocksdb:FuzzDecodeIncrementalHandle) have fuzz targets too, run
# by hand: instrumenting gRPC, etcd's client or cgo for them costs minutes
# of CI. Plain `go test` runs every target's seeds.
FUZZTIME ?= 10000x
FUZZMINIMIZETIME ?= 1000x
FUZZ_TARGETS = ./checkpoint/snapshot:FuzzDecodeMetadata ./sink/kafka:FuzzDecodeCommittable \
	./source/kafka:FuzzDecodeSplitState ./state:FuzzReadKeyedSnapshot \
	./state:FuzzReadOperatorSnapshot:2000x ./sink/kafka:FuzzDecodeWriterState:2000x \
	./sink/filesink:FuzzParseCommittable:2000x ./checkpoint/storage:FuzzDecodeJobResult:2000x

.PHONY: help demo test vet test-unit test-integration bench lint lint-static vulncheck fuzz fmt-check fmt deps deps-demo deps-test deps-lint kafka-start kafka-stop s3-start s3-stop

help:
	@echo "make demo               run the main example (examples/wordcount, else examples/datagen)"
	@echo "make demo-cluster       the word count on a coordinator and two worker processes (HA on etcd), one worker SIGKILLed"
	@echo "make test               go vet, staticcheck, govulncheck, unit tests (-race), fuzzing, integration tests against a real Kafka broker, S3 server and Schema Registry (TEST_OPERATOR=yes: and test-operator)"
	@echo "make test-unit          go vet and the unit tests only (starts an S3 server unless AWS_ENDPOINT_URL_S3 and S3_BUCKET are set)"
	@echo "make test-integration   the integration tests (starts a broker unless KAFKA_BROKERS is set, an S3 server, and a Schema Registry unless SCHEMA_REGISTRY_URL is set)"
	@echo "make test-operator      the Kubernetes operator (operator/, a module of its own): vet, staticcheck, and its tests against a real API server (scripts/envtest builds kube-apiserver and etcd once per machine) and a real broker"
	@echo "make operator-generate  the operator's deepcopy code, CRD and RBAC (deploy/operator/) from its Go types, with controller-gen"
	@echo "make bench              benchmarks (BENCH=regexp BENCH_PKGS=./pkg/...), also written to $(BENCH_OUT)"
	@echo "make lint               gofmt check, go vet and staticcheck"
	@echo "make lint-static        staticcheck (pinned in scripts/deps) over every package"
	@echo "make vulncheck          govulncheck (pinned) against a local copy of the Go vulnerability database"
	@echo "make fuzz               each checkpoint-data decoder's fuzz target for FUZZTIME ($(FUZZTIME))"
	@echo "make deps               install what is missing (apt-get as root), or say what to install"
	@echo "make kafka-start / kafka-stop   a local broker for your own runs (scripts/kafka)"
	@echo "make s3-start / s3-stop         a local S3 server for your own runs (scripts/s3)"

demo: deps-demo
	@if [ -d examples/wordcount ]; then \
		echo "+ $(GO) run ./examples/wordcount"; $(GO) run ./examples/wordcount; \
	else \
		echo "+ $(GO) run ./examples/datagen"; $(GO) run ./examples/datagen; \
	fi

.PHONY: demo-cluster
# One job on several OS processes (examples/clustercount): an embedded etcd
# and Kafka broker, a coordinator and two workers; kills a worker midway and
# checks that the output is exactly once.
demo-cluster: deps-demo
	@echo "+ $(GO) run ./examples/clustercount"; $(GO) run ./examples/clustercount

# With TEST_OPERATOR=yes, make test ends with the operator's tests
# (test-operator), whose API server and etcd scripts/envtest builds once
# per machine; envtest-start starts that build first, in the background at
# the lowest priority, so that it takes the CPU the other phases leave idle
# (the broker's start, tests waiting on it, downloads) without slowing
# their timing-sensitive tests, and test-operator waits for what is left of
# it. It is off by default: on a clean machine the envtest build (about
# 440 s of CPU, unoptimised) and the operator module's vet, staticcheck
# and race build (about 890 s of CPU with an empty build cache) would take
# CI past its budget on 2 cores (the figures are in
# deploy/operator/README.md). make test-operator runs them by hand.
TEST_OPERATOR ?= no
OPERATOR_TARGETS = $(if $(filter yes,$(TEST_OPERATOR)),$(1))
test: deps-test $(call OPERATOR_TARGETS,envtest-start) fmt-check vet lint-static vulncheck test-unit-only fuzz \
	test-integration-only $(call OPERATOR_TARGETS,test-operator)

test-unit: deps-test vet test-unit-only

test-integration: deps-test test-integration-only

vet:
	$(GO) vet ./...
	for m in $(SUBMODULES); do $(GO) -C $$m vet ./...; done

.PHONY: test-unit-only test-integration-only
# Starts an S3 server with scripts/s3 unless AWS_ENDPOINT_URL_S3 and
# S3_BUCKET are set, and always stops the server it started.
test-unit-only:
	scripts/with-s3 $(GO) test $(UNIT_FLAGS) $(UNIT_PKGS)
	for m in $(SUBMODULES); do $(GO) -C $$m test $(UNIT_FLAGS) ./...; done

# Starts a broker with scripts/kafka unless KAFKA_BROKERS is set, and an S3
# server as test-unit-only does, and always stops what it started.
test-integration-only:
	scripts/with-kafka scripts/with-s3 scripts/with-registry $(GO) test $(INTEGRATION_FLAGS) ./integration/...

bench: deps-test
	scripts/with-kafka $(GO) test -run '^$$' -bench '$(BENCH)' $(BENCH_FLAGS) $(BENCH_PKGS) | tee $(BENCH_OUT)

lint: fmt-check vet lint-static

lint-static: deps-lint
	$(STATICCHECK) ./...
	for m in $(SUBMODULES); do (cd $$m && $(STATICCHECK) ./...); done

vulncheck: deps-lint
	$(GOVULNCHECK) -db file://$(VULNDB) ./...

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; budget=$(FUZZTIME); \
		case $$rest in *:*) budget=$${rest#*:};; esac; \
		echo "+ $(GO) test -run '^$$' -fuzz '^$$name$$' -fuzztime $$budget -fuzzminimizetime $(FUZZMINIMIZETIME) $$pkg"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $$budget -fuzzminimizetime $(FUZZMINIMIZETIME) "$$pkg"; \
	done

fmt-check:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then \
		echo "gofmt would change these files (run 'make fmt'):"; echo "$$out"; exit 1; \
	fi

fmt:
	gofmt -w .

deps:
	scripts/deps all

deps-demo:
	@scripts/deps demo

deps-test:
	@scripts/deps test

deps-lint:
	@scripts/deps lint

kafka-start:
	scripts/kafka start

kafka-stop:
	scripts/kafka stop

s3-start:
	scripts/s3 start

s3-stop:
	scripts/s3 stop

.PHONY: test-operator operator-generate envtest-start
# The operator is a module of its own (operator/go.mod), so that a job's
# binary links no client-go: ./... above does not reach it. Its tests run
# under envtest: scripts/envtest builds kube-apiserver and etcd from the
# modules of operator/envtest/tools once per machine (minutes cold, cached
# in ~/.cache/sluice), and the job's processes (examples/wordcountd) on a
# broker that scripts/with-kafka starts. Its cases mostly wait on their
# jobs and run in parallel, four at a time.
OPERATOR_FLAGS ?= -race -count=1 -parallel 4 -timeout 20m
CONTROLLER_GEN ?= $(shell $(GO) env GOPATH)/bin/controller-gen
envtest-start:
	@scripts/envtest start

test-operator: deps-test deps-lint
	@out="$$(gofmt -l operator)"; if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi
	cd operator && $(GO) vet ./...
	cd operator && $(STATICCHECK) ./...
	@if [ -x "$(CONTROLLER_GEN)" ]; then $(MAKE) --no-print-directory operator-generate && \
		git diff --exit-code -- operator/api deploy/operator/crd deploy/operator/rbac || \
		{ echo "the generated CRD, RBAC or deepcopy code is stale: run make operator-generate"; exit 1; }; \
	else echo "controller-gen not installed: the generated manifests are not checked (go install sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0)"; fi
	assets="$$(scripts/envtest build | tail -n1)"; export "$${assets?}"; \
		cd operator && ../scripts/with-kafka $(GO) test $(OPERATOR_FLAGS) ./...

operator-generate:
	cd operator && $(CONTROLLER_GEN) object paths=./api/...
	cd operator && $(CONTROLLER_GEN) crd rbac:roleName=sluice-operator paths=./... \
		output:crd:dir=../deploy/operator/crd output:rbac:dir=../deploy/operator/rbac
