#!/usr/bin/env bash
# `make compare-cluster`: replicated writes on a local cluster of NODES nodes (each broker
# and controller), Apache Kafka 4.1.1 against ringbroker, ROUNDS times interleaved (K R, R K,
# ...), each run only once the machine is quiet (see compare.sh), medians with min-max.
#
# Per round and system: a fresh cluster with its defaults apart from ports and log
# directories, then
#   max-throughput-rf3      1 KiB records, 16 partitions of replication factor 3, acks=all
#   max-throughput          the same with replication factor 1, on the same cluster: the
#                           cost of replication is the ratio of the two
#   1kb-fixed-rate-16p-rf3  replication factor 3 at half of Kafka's max-throughput-rf3 rate
#                           of round 1 (HALF_RATE sets it when Kafka is not measured)
# Broker CPU and peak RSS are sums over the nodes. All nodes and ringbench share this
# machine, so the figures say how the systems compare on it, not what a real cluster does.
#
# Settings (environment; the Makefile passes its COMPARE_* variables):
#   OUT, DATA, DURATION, WARMUP, KAFKA_WARMUP, ROUNDS, LOAD_MAX, LOAD_WAIT, HALF_RATE,
#   BROKER_CPUS, CLIENT_CPUS  as in compare.sh (the three nodes share BROKER_CPUS)
#   SYSTEMS  which systems, in order (kafka ringbroker)
#   NODES    nodes per cluster (3)
#   IO       ringbroker's I/O backend (auto)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

OUT="${OUT:-results/compare-cluster-$(date +%Y%m%d-%H%M%S)}"
DATA="${DATA:-.cache/compare-data}"
DURATION="${DURATION:-30s}"
WARMUP="${WARMUP:-10s}"
KAFKA_WARMUP="${KAFKA_WARMUP:-30s}"
ROUNDS="${ROUNDS:-3}"
LOAD_MAX="${LOAD_MAX:-1.0}"
LOAD_WAIT="${LOAD_WAIT:-300}"
HALF_RATE="${HALF_RATE:-}"
SYSTEMS="${SYSTEMS-kafka ringbroker}"
NODES="${NODES:-3}"
IO="${IO:-auto}"
KAFKA_LIBS="$ROOT/.cache/kafka/libs"
WORKLOADS="$ROOT/bench/workloads"
RINGBENCH="${RINGBENCH:-$ROOT/bin/ringbench}"
RINGBROKER="${RINGBROKER:-$ROOT/bin/ringbroker}"
READY_TIMEOUT=180
STOP_TIMEOUT=60

# shellcheck source=tools/compare-lib.sh
. "$ROOT/tools/compare-lib.sh"

for tool in jq kcat java; do
	command -v "$tool" >/dev/null || die "$tool not found (make deps installs kcat and java; apt-get install jq)"
done
[[ -x $RINGBENCH && -x $RINGBROKER ]] || die "$RINGBENCH or $RINGBROKER missing: run make build"
compgen -G "$KAFKA_LIBS/kafka_2.13-*.jar" >/dev/null || die "no Apache Kafka jars in $KAFKA_LIBS: run make deps-kafka"
read -ra first <<<"$SYSTEMS"
[[ ${first[0]:-} == kafka || -n $HALF_RATE ]] || die "SYSTEMS=\"$SYSTEMS\" does not start with kafka: set HALF_RATE"
((NODES >= 3)) || die "NODES=$NODES: replication factor 3 needs at least 3"

# Ports: node i (1-based) serves clients on BASE+2i and its controller on BASE+2i+1.
for _ in {1..50}; do
	BASE=$((20000 + RANDOM % 20000))
	ok=1
	for ((p = BASE + 2; p <= BASE + 2 * NODES + 1; p++)); do port_free "$p" || ok=0; done
	((ok)) && break
done

mkdir -p "$OUT" "$DATA" "$OUT/bin"
OUT=$(cd "$OUT" && pwd)
DATA=$(cd "$DATA" && pwd)
LOG="$OUT/compare.log"
cp "$RINGBROKER" "$OUT/bin/ringbroker"
cp "$RINGBENCH" "$OUT/bin/ringbench"
RINGBROKER="$OUT/bin/ringbroker"
RINGBENCH="$OUT/bin/ringbench"
echo "compare-cluster: $NODES nodes per cluster, results in $OUT, data in $DATA" | tee "$LOG"
machine | tee "$OUT/machine.txt" | tee -a "$LOG"

label() {
	case $1 in
	kafka) echo "kafka-4.1.1-x$NODES" ;;
	*) echo "ringbroker-x$NODES" ;;
	esac
}

BOOTSTRAP=""
VOTERS=""
for ((i = 1; i <= NODES; i++)); do
	BOOTSTRAP+="${BOOTSTRAP:+,}127.0.0.1:$((BASE + 2 * i))"
	VOTERS+="${VOTERS:+,}$i@127.0.0.1:$((BASE + 2 * i + 1))"
done

PIDS=()
# start_cluster NAME: starts NODES fresh nodes and waits until one lists them all.
start_cluster() {
	local name=$1 cid i dir blog
	cid=$(new_cluster_id)
	PIDS=()
	for ((i = 1; i <= NODES; i++)); do
		dir="$DATA/$name-$i"
		blog="$RUN/$name/node$i.log"
		rm -rf "$dir"
		mkdir -p "$dir" "$RUN/$name"
		case $name in
		kafka)
			kafka_node "$dir" "$i" "$VOTERS" $((BASE + 2 * i)) $((BASE + 2 * i + 1)) "$cid" 3 "$blog"
			;;
		ringbroker)
			cat >"$dir/server.properties" <<-EOF
				process.roles=broker,controller
				node.id=$i
				controller.quorum.voters=$VOTERS
				listeners=PLAINTEXT://127.0.0.1:$((BASE + 2 * i)),CONTROLLER://127.0.0.1:$((BASE + 2 * i + 1))
				controller.listener.names=CONTROLLER
				log.dirs=$dir/data
				metrics.listen=
			EOF
			"$RINGBROKER" format --cluster-id "$cid" --config "$dir/server.properties" >>"$blog" 2>&1 ||
				die "format ringbroker node $i failed: see $blog"
			"${BROKER_PIN[@]}" "$RINGBROKER" --io="$IO" --config "$dir/server.properties" >>"$blog" 2>&1 &
			;;
		*) die "unknown system $name: want kafka or ringbroker" ;;
		esac
		PIDS+=($!)
	done
	local start=$SECONDS
	until kcat -b "$BOOTSTRAP" -L -m 2 2>/dev/null | grep -q " $NODES brokers"; do
		for i in "${!PIDS[@]}"; do
			kill -0 "${PIDS[$i]}" 2>/dev/null || die "$name node $((i + 1)) exited during start: see $RUN/$name/node$((i + 1)).log"
		done
		((SECONDS - start < READY_TIMEOUT)) || die "$name cluster not ready within ${READY_TIMEOUT}s: see $RUN/$name/"
		sleep 0.5
	done
	echo "compare-cluster: $name (pids ${PIDS[*]}) ready on $BOOTSTRAP in $((SECONDS - start))s" | tee -a "$LOG"
}

# stop_cluster NAME: records each node's lifetime peak RSS and CPU, stops them with SIGTERM
# and removes their data.
stop_cluster() {
	local name=$1 pid start
	for pid in "${PIDS[@]}"; do
		{
			echo "pid $pid"
			grep -E '^(VmHWM|VmRSS|RssAnon|Threads)' "/proc/$pid/status"
			echo "cpu_seconds $(cpu_seconds "$pid")"
		} >>"$RUN/$name/process.txt"
	done
	kill -TERM "${PIDS[@]}" 2>/dev/null || true
	start=$SECONDS
	for pid in "${PIDS[@]}"; do
		while kill -0 "$pid" 2>/dev/null; do
			if ((SECONDS - start >= STOP_TIMEOUT)); then
				kill -KILL "$pid" 2>/dev/null || true
				echo "compare-cluster: $name pid $pid did not stop within ${STOP_TIMEOUT}s; killed" | tee -a "$LOG"
			fi
			sleep 0.2
		done
		wait "$pid" 2>/dev/null || true
	done
	PIDS=()
	rm -rf "$DATA/$name"-*
	echo "compare-cluster: $name stopped" | tee -a "$LOG"
}

cleanup() {
	((${#PIDS[@]} == 0)) || kill -KILL "${PIDS[@]}" 2>/dev/null || true
}
trap cleanup EXIT

# bench NAME WORKLOAD WARMUP [ringbench flags]: one measured run into $RUN/NAME/WORKLOAD.json
# and the machine's load before it into WORKLOAD.load.
bench() {
	local name=$1 workload=$2 warmup=$3 pids
	shift 3
	wait_quiet
	echo "compare-cluster: $name: $workload (warmup $warmup, measured $DURATION) $*" | tee -a "$LOG"
	cut -d' ' -f1 /proc/loadavg >"$RUN/$name/$workload.load"
	pids=$(
		IFS=,
		echo "${PIDS[*]}"
	)
	"${CLIENT_PIN[@]}" "$RINGBENCH" run --bootstrap "$BOOTSTRAP" --workload "$WORKLOADS/${workload%%@*}.yaml" \
		--label "$(label "$name")" --duration "$DURATION" --warmup "$warmup" --broker-pid "$pids" \
		--progress-interval 5s --json "$RUN/$name/$workload.json" "$@" 2>&1 | tee -a "$LOG"
}

HALF=1kb-fixed-rate-16p-rf3@half-kafka-max
for round in $(seq "$ROUNDS"); do
	RUN="$OUT/r$round"
	for name in $(round_order "$round" $SYSTEMS); do
		start_cluster "$name"
		warmup=$WARMUP
		[[ $name == kafka && $round == 1 ]] && warmup=$KAFKA_WARMUP
		bench "$name" max-throughput-rf3 "$warmup"
		if [[ -z $HALF_RATE ]]; then
			HALF_RATE=$(jq -r '.publish.recordsPerSec / 2 | floor' "$RUN/$name/max-throughput-rf3.json")
			echo "compare-cluster: fixed rate for $HALF: $HALF_RATE records/s" | tee -a "$LOG"
		fi
		bench "$name" "$HALF" "$WARMUP" --rate "$HALF_RATE"
		bench "$name" max-throughput "$WARMUP"
		stop_cluster "$name"
	done
done
WORKLOADS_RUN="max-throughput-rf3 $HALF max-throughput"

{
	summary_warnings
	echo "Medians over $ROUNDS rounds (min-max), systems interleaved in each round; $NODES nodes on one machine; CPU and RSS summed over the nodes."
	echo
	echo "| workload | system | publish rec/s | e2e p50 ms | e2e p99 ms | e2e p99.9 ms | broker CPU µs/record | peak RSS MiB (anon) |"
	echo "|---|---|--:|--:|--:|--:|--:|--:|"
	median_rows "$WORKLOADS_RUN" "$SYSTEMS"
	echo
	echo "| round | workload | system | publish rec/s | publish p99 ms | e2e p50 / p99 / p99.9 ms | unsent | load before |"
	echo "|---|---|---|--:|--:|--:|--:|--:|"
	for round in $(seq "$ROUNDS"); do
		for w in $WORKLOADS_RUN; do
			for name in $SYSTEMS; do
				jq -r --arg r "$round" --arg w "$w" --arg b "$(label "$name")" --arg load "$(cat "$OUT/r$round/$name/$w.load")" '
					def f: if . == null then "-" elif . >= 100 then (. | round | tostring) else (. * 100 | round / 100 | tostring) end;
					"| \($r) | \($w) | \($b) | \(.publish.recordsPerSec | round) | \(.publish.latency.p99Ms | f) | " +
					"\(.e2e.latency.p50Ms | f) / \(.e2e.latency.p99Ms | f) / \(.e2e.latency."p99.9Ms" | f) | \(.unsent) | \($load) |"
				' "$OUT/r$round/$name/$w.json"
			done
		done
	done
} >"$OUT/summary.md"
tee -a "$LOG" <"$OUT/summary.md"

if [[ " $SYSTEMS " == *" kafka "* && " $SYSTEMS " == *" ringbroker "* ]]; then
	r() { ratio "$(med "$1" "$3" "$4")" "$(med "$2" "$3" "$4")"; }
	{
		echo "issue 11 goals, medians of $ROUNDS rounds ($NODES nodes each)"
		goal "RF 3 acks=all max rec/s, ringbroker/kafka" "$(r ringbroker kafka max-throughput-rf3 .publish.recordsPerSec)" ">=" 1.5
		goal "RF 3 e2e p99 at $HALF_RATE rec/s, ringbroker/kafka" "$(r ringbroker kafka "$HALF" .e2e.latency.p99Ms)" "<=" 0.5
		for name in $SYSTEMS; do
			printf '%-58s %6sx  (for reference)\n' "RF 3 / RF 1 max rec/s, $(label "$name")" \
				"$(ratio "$(med "$name" max-throughput-rf3 .publish.recordsPerSec)" "$(med "$name" max-throughput .publish.recordsPerSec)")"
		done
	} | tee "$OUT/goals.txt" | tee -a "$LOG"
fi
echo "compare-cluster: done; $OUT/summary.md" | tee -a "$LOG"
