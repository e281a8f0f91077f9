# ringbroker build and test entry points. Every go command gets $(GOLDFLAGS):
# giouring reaches into the runtime with go:linkname, which Go 1.23+ refuses
# to link without -checklinkname=0.

GO            ?= go
GOLDFLAGS     := -ldflags=-checklinkname=0
BIN           := bin
KAFKA_VERSION := 4.1.1
KAFKA_LIBS    := .cache/kafka/libs
KAFKA_STAMP   := $(KAFKA_LIBS)/.fetched-$(KAFKA_VERSION)
# Per-target time for fuzz-short; BENCHTIME for bench.
FUZZTIME      ?= 3s
BENCHTIME     ?= 1s
# Which broker the e2e suite runs against: ringbroker (both I/O backends) or kafka.
E2E_BROKER    ?= ringbroker
E2E_TIMEOUT   ?= 20m
UNIT_TIMEOUT  ?= 10m
# Tests marked parallel run this many at a time in each package: the slow ones of ./broker
# spend their time waiting on in-process clusters (timeouts, elections), not computing.
UNIT_PARALLEL ?= 4
# make compare: measured time and warmup per workload, Kafka's first warmup (JIT),
# the workloads after max-throughput and the half-rate run, and where results go.
COMPARE_DURATION     ?= 30s
COMPARE_WARMUP       ?= 10s
COMPARE_KAFKA_WARMUP ?= 30s
COMPARE_EXTRA        ?= small-messages 100-partitions
COMPARE_ROUNDS       ?= 3
# 0: only COMPARE_EXTRA's workloads, without max-throughput and the half-rate run.
COMPARE_BASE         ?= 1
COMPARE_OUT          ?= results/compare-$(shell date +%Y%m%d-%H%M%S)
# CPU lists (taskset -c) for the brokers under test and for the clients; empty for every CPU.
# Disjoint lists on a machine with cores to spare measure the brokers, not the shared machine.
COMPARE_BROKER_CPUS  ?=
COMPARE_CLIENT_CPUS  ?=
COMPARE_PINS          = BROKER_CPUS="$(COMPARE_BROKER_CPUS)" CLIENT_CPUS="$(COMPARE_CLIENT_CPUS)"

# Packages that hold Go files, without the end-to-end suite.
UNIT_PKGS = $(shell $(GO) list -e ./... 2>/dev/null | grep -v '/e2e$$')

.NOTPARALLEL:
.PHONY: all build run test unit e2e chaos bench compare compare-tools compare-cluster profile kafka-go-suite fuzz-short vet deps deps-go deps-kcat deps-kafka deps-systemd dist clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build $(GOLDFLAGS) -o $(BIN)/ringbroker ./cmd/ringbroker
	@if [ "$$($(GO) list -f '{{.Name}}' ./cmd/ringbench 2>/dev/null)" = main ]; then \
		echo "$(GO) build $(GOLDFLAGS) -o $(BIN)/ringbench ./cmd/ringbench"; \
		$(GO) build $(GOLDFLAGS) -o $(BIN)/ringbench ./cmd/ringbench; \
	fi

# make dist: the tarball for bare metal, $(DIST)/ringbroker-$(VERSION)-linux-$(ARCH).tar.gz: a
# static bin/ringbroker, config/server.properties, the systemd unit and user (systemd/), the
# Grafana dashboard (grafana/), README.md and METRICS.md, and LICENSE and NOTICE if present.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
ARCH     ?= $(shell $(GO) env GOARCH)
DIST     ?= dist
DIST_DIR  = $(DIST)/ringbroker-$(VERSION)-linux-$(ARCH)

dist:
	rm -rf $(DIST_DIR) $(DIST_DIR).tar.gz
	mkdir -p $(DIST_DIR)/bin $(DIST_DIR)/config $(DIST_DIR)/systemd $(DIST_DIR)/grafana
	CGO_ENABLED=0 GOOS=linux GOARCH=$(ARCH) $(GO) build $(GOLDFLAGS) -trimpath -o $(DIST_DIR)/bin/ringbroker ./cmd/ringbroker
	cp deploy/config/server.properties $(DIST_DIR)/config/
	cp deploy/systemd/ringbroker.service deploy/systemd/ringbroker.sysusers $(DIST_DIR)/systemd/
	cp deploy/grafana/ringbroker.json $(DIST_DIR)/grafana/
	cp README.md docs/METRICS.md $(DIST_DIR)/
	for f in LICENSE LICENSE.md NOTICE; do if [ -f $$f ]; then cp $$f $(DIST_DIR)/; fi; done
	tar -C $(DIST) --sort=name --owner=0 --group=0 --numeric-owner -czf $(DIST_DIR).tar.gz $(notdir $(DIST_DIR))
	rm -rf $(DIST_DIR)
	@echo "$(DIST_DIR).tar.gz"

# No config: one node, data in ./data, clients on 127.0.0.1:9092, metrics on 127.0.0.1:9644.
run: build
	./$(BIN)/ringbroker

# The whole suite, in order: installs, static checks, unit tests, end-to-end, short fuzzing.
test: deps vet unit e2e fuzz-short

unit:
	@pkgs="$(UNIT_PKGS)"; if [ -z "$$pkgs" ]; then echo "unit: no packages"; exit 0; fi; \
	echo "$(GO) test $(GOLDFLAGS) -count=1 -parallel $(UNIT_PARALLEL) -timeout $(UNIT_TIMEOUT) <packages>"; \
	$(GO) test $(GOLDFLAGS) -count=1 -parallel $(UNIT_PARALLEL) -timeout $(UNIT_TIMEOUT) $$pkgs

e2e:
	E2E_BROKER=$(E2E_BROKER) $(GO) test $(GOLDFLAGS) -count=1 -timeout $(E2E_TIMEOUT) -v ./e2e/

# The Jepsen-style fault test of replicated partitions (e2e/chaos_test.go) at full size:
# CHAOS_FAULTS faults (200 unless set), CHAOS_SEED to repeat a run, CHAOS_NET=proxy without namespaces.
chaos: build deps-kafka
	CHAOS_FAULTS=$${CHAOS_FAULTS:-200} E2E_BROKER=$(E2E_BROKER) $(GO) test $(GOLDFLAGS) -count=1 -timeout 120m -run '^TestChaos$$' -v ./e2e/

# segmentio/kafka-go's own test suite against BROKER=uring|netpoll|kafka on ports 9092-9094
# (about 4 minutes; not part of `make test`); see tools/kafka-go-suite.sh.
kafka-go-suite: build deps-kafka
	tools/kafka-go-suite.sh

bench:
	@pkgs="$(UNIT_PKGS)"; if [ -z "$$pkgs" ]; then echo "bench: no packages"; exit 0; fi; \
	$(GO) test $(GOLDFLAGS) -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $$pkgs

# Apache Kafka 4.1.1, ringbroker (io_uring) and ringbroker (netpoll), interleaved for
# COMPARE_ROUNDS rounds (K U N, U N K, N K U, ...) after the machine is quiet, under the same ringbench
# workloads, reported as medians; see tools/compare.sh and BENCHMARKS.md.
compare: build deps-kcat deps-kafka
	@command -v jq >/dev/null 2>&1 && test -x /usr/bin/time || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y jq time; }
	OUT="$(COMPARE_OUT)" DURATION="$(COMPARE_DURATION)" WARMUP="$(COMPARE_WARMUP)" \
		KAFKA_WARMUP="$(COMPARE_KAFKA_WARMUP)" EXTRA="$(COMPARE_EXTRA)" ROUNDS="$(COMPARE_ROUNDS)" BASE="$(COMPARE_BASE)" $(COMPARE_PINS) tools/compare.sh

# Apache Kafka 4.1.1 and ringbroker measured with Kafka's own kafka-producer-perf-test and
# kafka-consumer-perf-test, interleaved for COMPARE_ROUNDS rounds after the machine is quiet;
# see tools/compare-tools.sh and BENCHMARKS.md.
compare-tools: build deps-kcat deps-kafka
	OUT="$(subst compare-,compare-tools-,$(COMPARE_OUT))" ROUNDS="$(COMPARE_ROUNDS)" $(COMPARE_PINS) tools/compare-tools.sh

# Replicated writes on three local nodes: Apache Kafka 4.1.1 vs ringbroker, RF 3 and RF 1, the
# same rounds and quiet-machine rule as compare; see tools/compare-cluster.sh and BENCHMARKS.md.
compare-cluster: build deps-kcat deps-kafka
	@command -v jq >/dev/null 2>&1 || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y jq; }
	OUT="$(subst compare-,compare-cluster-,$(COMPARE_OUT))" DURATION="$(COMPARE_DURATION)" WARMUP="$(COMPARE_WARMUP)" \
		KAFKA_WARMUP="$(COMPARE_KAFKA_WARMUP)" ROUNDS="$(COMPARE_ROUNDS)" $(COMPARE_PINS) tools/compare-cluster.sh

# A CPU profile of the broker under max-throughput, into results/profile-<date>/.
profile: build
	GO="$(GO)" tools/profile.sh

fuzz-short:
	GO="$(GO)" GOLDFLAGS="$(GOLDFLAGS)" FUZZTIME="$(FUZZTIME)" tools/fuzz-short.sh

vet:
	@out="$$(find . -name '*.go' -not -path './.cache/*' -not -path './.git/*' -print0 | xargs -0r gofmt -l)"; \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(GOLDFLAGS) ./...

deps: deps-go deps-kcat deps-kafka deps-clients deps-systemd

deps-go:
	$(GO) mod download

deps-kcat:
	@command -v kcat >/dev/null 2>&1 || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y kcat; }

deps-kafka: $(KAFKA_STAMP)

# systemd-analyze and systemd-sysusers, which deploy/deploy_test.go checks the systemd unit with.
deps-systemd:
	@command -v systemd-analyze >/dev/null 2>&1 && command -v systemd-sysusers >/dev/null 2>&1 || \
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y systemd; }

# Other clients for e2e/clients_test.go and e2e/txn_python_test.go, pinned: kafka-python and
# confluent-kafka (its wheel bundles librdkafka) from PyPI, kafkajs from npm.
KAFKA_PYTHON_VERSION    := 3.0.12
CONFLUENT_KAFKA_VERSION := 2.16.1
KAFKAJS_VERSION         := 2.2.4
CLIENTS_STAMP           := .cache/clients-$(KAFKA_PYTHON_VERSION)-$(CONFLUENT_KAFKA_VERSION)-$(KAFKAJS_VERSION)
deps-clients: $(CLIENTS_STAMP)

$(CLIENTS_STAMP):
	@command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1 || \
		{ apt-get update && apt-get install -y python3 python3-pip; }
	@command -v npm >/dev/null 2>&1 || { apt-get update && apt-get install -y nodejs npm; }
	rm -rf .cache/python .cache/node
	python3 -m pip install -q --disable-pip-version-check --only-binary=confluent-kafka --target .cache/python \
		kafka-python==$(KAFKA_PYTHON_VERSION) confluent-kafka==$(CONFLUENT_KAFKA_VERSION)
	npm install --silent --no-audit --no-fund --prefix .cache/node kafkajs@$(KAFKAJS_VERSION)
	touch $@

# Apache Kafka jars (broker, tools, clients and their runtime dependencies) for the
# e2e suite's reference broker and Java tools. Refetched only when the pom changes.
$(KAFKA_STAMP): tools/kafka/pom.xml
	@command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1 || \
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y default-jre-headless maven; }
	rm -rf $(KAFKA_LIBS)
	mvn -q -B -Dstyle.color=never -f tools/kafka/pom.xml dependency:copy-dependencies \
		-Dkafka.version=$(KAFKA_VERSION) -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(KAFKA_LIBS)
	touch $@

clean:
	rm -rf $(BIN) $(DIST)
