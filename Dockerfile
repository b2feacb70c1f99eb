# The image of a Sluice job: the user's program (examples/wordcountd, the
# word count as a service, unless APP says otherwise) as the entrypoint, and the sluice CLI beside it. One
# image runs every role: `--role coordinator|worker` or SLUICE_ROLE picks
# it at start (deploy/kubernetes/README.md).
#
#   docker build -t sluice-wordcount:dev .
#   docker build --build-arg APP=./examples/observability -t sluice-observability:dev .
#   docker run --rm -e KAFKA_BROKERS=... -e SLUICE_CHECKPOINT_DIR=s3://... sluice-wordcount:dev   # single process
#   docker run --rm --entrypoint sluice sluice-wordcount:dev --help
#
# Both binaries are built with cgo against Debian bookworm's RocksDB 7.8.3,
# the version github.com/linxGnu/grocksdb v1.7.14 (go.mod) is written for,
# and linked dynamically: the runtime stage has Debian's RocksDB library and
# its compression libraries, nothing else of the build.

ARG GO_VERSION=1.27.3

FROM golang:${GO_VERSION}-bookworm AS build
# gcc, g++ and libc6-dev come with the golang image; librocksdb-dev brings
# RocksDB's headers and library and the -dev packages of the libraries
# grocksdb links (snappy, lz4, zstd, zlib, bz2, gflags).
RUN apt-get update \
	&& apt-get install -y --no-install-recommends librocksdb-dev \
	&& rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Modules first, so that a change of the code alone reuses this layer.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The package of the program to run: any main package of the module that
# takes the role flags.
ARG APP=./examples/wordcountd
# grpcnotrace keeps gRPC (etcd's client, which a program with HA links:
# wordcountd through package runner) from linking golang.org/x/net/trace,
# whose text/template makes the linker keep every exported method of every
# type: without it a cluster worker's binary, all resident, is a third
# larger (docs/performance.md, "A cluster worker's binary").
RUN CGO_ENABLED=1 go build -trimpath -tags grpcnotrace -ldflags="-s -w" -o /out/app "$APP" \
	&& CGO_ENABLED=1 go build -trimpath -tags grpcnotrace -ldflags="-s -w" -o /out/sluice ./cmd/sluice

FROM debian:bookworm-slim
# librocksdb7.8 is the runtime package of bookworm's librocksdb-dev (the
# same 7.8.3); it depends on libsnappy1v5, liblz4-1, libzstd1, zlib1g,
# libbz2-1.0, libgflags2.2 and libstdc++6, which is all the binaries link
# besides libc. ca-certificates: TLS to S3, Kafka and etcd.
RUN apt-get update \
	&& apt-get install -y --no-install-recommends librocksdb7.8 ca-certificates \
	&& rm -rf /var/lib/apt/lists/* \
	&& groupadd --gid 10001 sluice \
	&& useradd --uid 10001 --gid 10001 --no-create-home --home-dir /var/lib/sluice \
		--shell /usr/sbin/nologin sluice \
	&& install -d -o 10001 -g 10001 -m 0750 /var/lib/sluice
COPY --from=build /out/app /usr/local/bin/app
COPY --from=build /out/sluice /usr/local/bin/sluice
# A numeric user, so that Kubernetes' runAsNonRoot can check it.
USER 10001:10001
# The working directory, RocksDB's local state among it; on Kubernetes an
# emptyDir, as /tmp is (the root file system is read-only there).
WORKDIR /var/lib/sluice
# 6123 control plane (jobmanager.rpc.port), 8081 REST API, dashboard and
# coordinator metrics (rest.port), 6121 data plane (taskmanager.data.port),
# 9249 worker metrics (Flink's Prometheus reporter port).
EXPOSE 6123 8081 6121 9249
ENTRYPOINT ["/usr/local/bin/app"]
