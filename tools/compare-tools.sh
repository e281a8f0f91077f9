#!/usr/bin/env bash
# `make compare-tools`: Apache Kafka 4.1.1 (KRaft, single node) and ringbroker measured with
# Kafka's own perf tools, as a Kafka user compares brokers: kafka-producer-perf-test writes
# RECORDS records of RECORD_SIZE bytes into a fresh topic of PARTITIONS partitions as fast as
# it can (acks=ACKS, the Java client's defaults otherwise), then kafka-consumer-perf-test reads
# them all back in a consumer group. Each broker starts fresh for each round, ROUNDS rounds
# interleaved and rotated (K U N, U N K, N K U, ...), each tool run only once the machine is
# quiet (1-minute load below LOAD_MAX, else a loud warning). The broker's CPU time is taken
# over each tool's run.
# summary.md gets the medians with min-max and every run.
#
# The producer's figures are the tool's, over its whole run: they include the client JVM's
# warm-up (its first seconds), and Kafka's own JIT warm-up, as a user's first run would.
#
# Settings (environment; the Makefile passes its COMPARE_* variables):
#   OUT          result directory           (results/compare-tools-<date>-<time>)
#   DATA         log directories, one disk  (.cache/compare-data)
#   RECORDS      records produced and consumed per run (4000000)
#   RECORD_SIZE  bytes per record           (1024)
#   PARTITIONS   partitions of the topic    (16)
#   ACKS         the producer's acks        (all)
#   BROKERS      which brokers, in order    (kafka uring netpoll)
#   ROUNDS       how many times each broker runs, interleaved (3)
#   LOAD_MAX     the 1-minute load at or above which a run waits before starting (1.0)
#   LOAD_WAIT    how long it waits at most, then warns loudly and goes on (300 s)
#   PORT         client port of the broker under test (a free one; Kafka's controller PORT+1)
#   BROKER_CPUS, CLIENT_CPUS  CPU lists (taskset -c) for the brokers and for Kafka's tools;
#                empty for every CPU (see tools/compare-lib.sh)
#   RINGBROKER   binary to measure (bin/ringbroker); copied into $OUT/bin first
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

OUT="${OUT:-results/compare-tools-$(date +%Y%m%d-%H%M%S)}"
DATA="${DATA:-.cache/compare-data}"
RECORDS="${RECORDS:-4000000}"
RECORD_SIZE="${RECORD_SIZE:-1024}"
PARTITIONS="${PARTITIONS:-16}"
ACKS="${ACKS:-all}"
BROKERS="${BROKERS-kafka uring netpoll}"
ROUNDS="${ROUNDS:-3}"
LOAD_MAX="${LOAD_MAX:-1.0}"
LOAD_WAIT="${LOAD_WAIT:-300}"
PORT="${PORT:-}"
KAFKA_LIBS="$ROOT/.cache/kafka/libs"
RINGBROKER="${RINGBROKER:-$ROOT/bin/ringbroker}"
READY_TIMEOUT=180 # seconds for a broker to answer Metadata
STOP_TIMEOUT=60   # seconds for a clean shutdown after SIGTERM
TOPIC=perf

# shellcheck source=tools/compare-lib.sh
. "$ROOT/tools/compare-lib.sh"
trap cleanup EXIT

for tool in kcat java; do
	command -v "$tool" >/dev/null || die "$tool not found (make deps installs kcat and java)"
done
[[ -x $RINGBROKER ]] || die "$RINGBROKER missing: run make build"
compgen -G "$KAFKA_LIBS/kafka_2.13-*.jar" >/dev/null || die "no Apache Kafka jars in $KAFKA_LIBS: run make deps-kafka"
[[ -n $BROKERS ]] || die "BROKERS is empty"
pick_port

mkdir -p "$OUT/bin" "$DATA"
OUT=$(cd "$OUT" && pwd)
DATA=$(cd "$DATA" && pwd)
LOG="$OUT/compare.log"
cp "$RINGBROKER" "$OUT/bin/ringbroker"
RINGBROKER="$OUT/bin/ringbroker"
echo "compare-tools: results in $OUT, broker data in $DATA" | tee "$LOG"
machine | tee "$OUT/machine.txt" | tee -a "$LOG"

# A log4j2 configuration for the tools that keeps their output to warnings.
TOOLS_LOG4J="$OUT/tools-log4j2.properties"
log4j2_config warn >"$TOOLS_LOG4J"

# kafka_tool CLASS ARGS...: one of Kafka's command-line tools.
kafka_tool() {
	"${CLIENT_PIN[@]}" java -Dlog4j2.configurationFile="$TOOLS_LOG4J" -cp "$KAFKA_LIBS/*" "$@"
}

# measure NAME TOOL CLASS ARGS...: runs a tool once the machine is quiet, its output into
# $RUN/NAME/TOOL.out and into $RUN/NAME/TOOL.cpu the broker's CPU seconds over the run and the
# load when it began.
measure() {
	local name=$1 tool=$2 cpu0 load0
	shift 2
	wait_quiet
	load0=$(cut -d' ' -f1 /proc/loadavg)
	cpu0=$(cpu_seconds "$PID")
	echo "compare-tools: $name: $tool (load $load0)" | tee -a "$LOG"
	kafka_tool "$@" >"$RUN/$name/$tool.out" 2>&1 || die "$tool against $name failed: see $RUN/$name/$tool.out"
	echo "$(awk -v a="$cpu0" -v b="$(cpu_seconds "$PID")" 'BEGIN { printf "%.2f", b - a }') $load0" >"$RUN/$name/$tool.cpu"
	tail -1 "$RUN/$name/$tool.out" | tee -a "$LOG"
}

for round in $(seq "$ROUNDS"); do
	RUN="$OUT/r$round"
	for name in $(round_order "$round" $BROKERS); do
		start_broker "$name"
		kafka_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "127.0.0.1:$PORT" --create --topic "$TOPIC" \
			--partitions "$PARTITIONS" --replication-factor 1 >"$RUN/$name/topic.out" 2>&1 ||
			die "create topic on $name failed: see $RUN/$name/topic.out"
		measure "$name" producer org.apache.kafka.tools.ProducerPerformance --topic "$TOPIC" --num-records "$RECORDS" \
			--record-size "$RECORD_SIZE" --throughput -1 --producer-props "bootstrap.servers=127.0.0.1:$PORT" "acks=$ACKS"
		measure "$name" consumer org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "127.0.0.1:$PORT" \
			--topic "$TOPIC" --messages "$RECORDS" --timeout 60000 --group "perf-$round"
		stop_broker "$name"
	done
done

# row ROUND NAME: one run's figures, tab-separated: producer records/s, MB/s, latency p50,
# p99, p99.9 (ms), broker CPU µs per record, load; consumer fetch MB/s, records/s over its
# fetches, broker CPU µs per record, load; peak RSS MiB.
row() {
	local d="$OUT/r$1/$2"
	paste <(grep ' records sent, .* 99.9th\.$' "$d/producer.out" | tail -1 | sed -E 's/.* records sent, ([0-9.]+) records\/sec \(([0-9.]+) MB\/sec\).*, ([0-9.]+) ms 50th, [0-9.]+ ms 95th, ([0-9.]+) ms 99th, ([0-9.]+) ms 99.9th\./\1\t\2\t\3\t\4\t\5/') \
		<(awk -v n="$RECORDS" '{ printf "%.2f\t%s\n", $1 / n * 1e6, $2 }' "$d/producer.cpu") \
		<(grep -E '^[0-9]{4}-[0-9]{2}-[0-9]{2} ' "$d/consumer.out" | tail -1 | awk -F', ' '{ printf "%s\t%s\n", $9, $10 }') \
		<(awk -v n="$RECORDS" '{ printf "%.2f\t%s\n", $1 / n * 1e6, $2 }' "$d/consumer.cpu") \
		<(awk '/VmHWM/ { printf "%d\n", $2 / 1024 }' "$d/process.txt")
}

# column NAME K: the median (min-max) of column K of NAME's rows over the rounds.
column() {
	local r
	for r in $(seq "$ROUNDS"); do row "$r" "$1"; done | cut -f"$2" | sort -g |
		awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.6g (%.6g-%.6g)", m, v[1], v[NR] }'
}

{
	summary_warnings
	echo "Kafka's perf tools, $RECORDS records of $RECORD_SIZE bytes into $PARTITIONS partitions (acks=$ACKS), a fresh broker each run;"
	echo "medians over $ROUNDS rounds (min-max), brokers interleaved in each round. Producer figures are the tool's over its"
	echo "whole run; consumer MB/s and records/s are over its fetches (fetch.MB.sec, fetch.nMsg.sec), after the group joined."
	echo
	echo "| broker | producer rec/s | producer p99 ms | producer p99.9 ms | broker CPU µs/record producing | consumer MB/s | broker CPU µs/record consuming | peak RSS MiB |"
	echo "|---|--:|--:|--:|--:|--:|--:|--:|"
	for name in $BROKERS; do
		echo "| $(label "$name") | $(column "$name" 1) | $(column "$name" 4) | $(column "$name" 5) | $(column "$name" 6) | $(column "$name" 8) | $(column "$name" 10) | $(column "$name" 12) |"
	done
	echo
	echo "| round | broker | producer rec/s | MB/s | p50 / p99 / p99.9 ms | CPU µs/record | load | consumer MB/s | rec/s | CPU µs/record | load | peak RSS MiB |"
	echo "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
	for round in $(seq "$ROUNDS"); do
		for name in $BROKERS; do
			row "$round" "$name" | awk -F'\t' -v r="$round" -v b="$(label "$name")" \
				'{ printf "| %s | %s | %s | %s | %s / %s / %s | %s | %s | %s | %s | %s | %s | %s |\n", r, b, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 }'
		done
	done
} >"$OUT/summary.md"
tee -a "$LOG" <"$OUT/summary.md"
