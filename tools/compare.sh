#!/usr/bin/env bash
# `make compare`: runs the same ringbench workloads against Apache Kafka 4.1.1
# (KRaft, single node), ringbroker with io_uring and ringbroker with netpoll,
# one broker after the other on this machine with their logs on the same disk,
# ROUNDS times interleaved (K U N, U N K, N K U, ...), each run only once the machine is
# quiet (1-minute load below LOAD_MAX, else a loud warning), and writes the
# medians with min-max, every run, the issue's goals and the comparison
# (tables, HTML pages, latency charts of round 1) to $OUT.
#
# Order: Kafka first, because the fixed-rate workload runs at half of Kafka's
# measured maximum. Kafka's first workload gets a long warmup for its JIT; the
# JVM stays up for the later workloads, so they start warm.
#
# Every broker runs with its defaults apart from ports and log directory.
# Kafka gets the JVM options of its own start scripts (kafka-server-start.sh:
# -Xmx1G -Xms1G; kafka-run-class.sh: G1 with 20 ms pause target, ...).
#
# Settings (environment; the Makefile passes its COMPARE_* variables):
#   OUT            result directory           (results/compare-<date>-<time>)
#   DATA           log directories, one disk  (.cache/compare-data)
#   DURATION       measured time per workload (30s)
#   WARMUP         warmup per workload        (10s)
#   KAFKA_WARMUP   warmup of Kafka's first workload, for its JIT (30s)
#   BASE           1: max-throughput and the half-rate run before EXTRA (issue 9's figures);
#                  0: EXTRA alone, for a quicker side-by-side of those workloads (1)
#   EXTRA          workloads after max-throughput and the half-rate run
#                  (small-messages 100-partitions; "" for none). A transactional one
#                  (transactions) adds its commit latencies to summary.md and issue 12's
#                  goals to goals.txt; it needs a broker with a transaction coordinator.
#                  W@kafka-rate runs workload W at the records/s Kafka reached with W in
#                  round 1 (W must come earlier in EXTRA, Kafka first in BROKERS), so
#                  latencies compare at equal work (transactions transactions@kafka-rate).
#   BROKERS        which brokers, in order    (kafka uring netpoll)
#   ROUNDS         how many times each broker runs, interleaved and rotated (K U N, U N K, ...) (3)
#   LOAD_MAX       the 1-minute load at or above which a run waits before starting (1.0)
#   LOAD_WAIT      how long it waits at most, then warns loudly and goes on (300 s)
#   HALF_RATE      fixed rate when Kafka is not in BROKERS (records/s)
#   PORT           client port of the broker under test (a free one; Kafka's controller PORT+1)
#   BROKER_CPUS, CLIENT_CPUS  CPU lists (taskset -c) for the brokers and for ringbench; empty
#                  for every CPU (see tools/compare-lib.sh)
#   RINGBROKER, RINGBENCH  binaries to measure with (bin/ringbroker, bin/ringbench); they
#                  are copied into $OUT/bin first, as other builds may replace bin/ meanwhile
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

OUT="${OUT:-results/compare-$(date +%Y%m%d-%H%M%S)}"
DATA="${DATA:-.cache/compare-data}"
DURATION="${DURATION:-30s}"
WARMUP="${WARMUP:-10s}"
KAFKA_WARMUP="${KAFKA_WARMUP:-30s}"
EXTRA="${EXTRA-small-messages 100-partitions}"
BROKERS="${BROKERS-kafka uring netpoll}"
ROUNDS="${ROUNDS:-3}"
BASE="${BASE:-1}"
LOAD_MAX="${LOAD_MAX:-1.0}"
LOAD_WAIT="${LOAD_WAIT:-300}"
HALF_RATE="${HALF_RATE:-}"
PORT="${PORT:-}"
KAFKA_LIBS="$ROOT/.cache/kafka/libs"
WORKLOADS="$ROOT/bench/workloads"
RINGBENCH="${RINGBENCH:-$ROOT/bin/ringbench}"
RINGBROKER="${RINGBROKER:-$ROOT/bin/ringbroker}"
READY_TIMEOUT=180 # seconds for a broker to answer Metadata
STOP_TIMEOUT=60   # seconds for a clean shutdown after SIGTERM

# shellcheck source=tools/compare-lib.sh
. "$ROOT/tools/compare-lib.sh"
trap cleanup EXIT

for tool in jq kcat java /usr/bin/time; do
	command -v "$tool" >/dev/null || die "$tool not found (make deps installs kcat and java; apt-get install jq time)"
done
[[ -x $RINGBENCH && -x $RINGBROKER ]] || die "$RINGBENCH or $RINGBROKER missing: run make build"
compgen -G "$KAFKA_LIBS/kafka_2.13-*.jar" >/dev/null || die "no Apache Kafka jars in $KAFKA_LIBS: run make deps-kafka"
read -ra first <<<"$BROKERS"
((${#first[@]} > 0)) || die "BROKERS is empty"
[[ ${first[0]:-} == kafka || -n $HALF_RATE ]] || die "BROKERS=\"$BROKERS\" does not start with kafka: set HALF_RATE"
for w in $EXTRA; do
	[[ $w != *@kafka-rate || ${first[0]:-} == kafka ]] || die "EXTRA has $w but BROKERS=\"$BROKERS\" does not start with kafka"
	[[ $w != *@kafka-rate || " $EXTRA " == *" ${w%%@*} "* ]] || die "EXTRA has $w without ${w%%@*} before it"
done
[[ $(tr ' ' '\n' <<<"$BROKERS" | sed '/^$/d' | sort | uniq -d) == "" ]] || die "BROKERS=\"$BROKERS\" names a broker twice"

pick_port

mkdir -p "$OUT" "$DATA"
OUT=$(cd "$OUT" && pwd)
DATA=$(cd "$DATA" && pwd)
LOG="$OUT/compare.log"
mkdir -p "$OUT/bin"
cp "$RINGBROKER" "$OUT/bin/ringbroker"
cp "$RINGBENCH" "$OUT/bin/ringbench"
RINGBROKER="$OUT/bin/ringbroker"
RINGBENCH="$OUT/bin/ringbench"
echo "compare: results in $OUT, broker data in $DATA" | tee "$LOG"

# txn_workload WORKLOAD: the workload is transactional (its result of round 1 on the first
# broker has transactions).
txn_workload() {
	jq -e '.transactions != null' "$OUT/r1/${first[0]}/$1.json" >/dev/null
}

machine | tee "$OUT/machine.txt" | tee -a "$LOG"

# bench NAME WORKLOAD WARMUP [ringbench flags]: one measured run into
# $OUT/NAME/WORKLOAD.json, and into WORKLOAD.load how busy the machine was:
# the 1-minute load average before and after, the cores kept busy on average
# over the run by everything (broker, ringbench and anything else), and the
# cores ringbench itself kept busy.
bench() {
	local name=$1 workload=$2 warmup=$3 load0 busy0 total0 busy1 total1 wall user sys
	shift 3
	# Each workload starts on a quiet machine, not in the load its predecessor left.
	wait_quiet
	echo "compare: $name: $workload (warmup $warmup, measured $DURATION) $*" | tee -a "$LOG"
	load0=$(cut -d' ' -f1 /proc/loadavg)
	read -r busy0 total0 < <(cpu_jiffies)
	# GNU time records ringbench's own CPU use: the client shares the machine.
	/usr/bin/time -o "$RUN/$name/$workload.client" -f '%e %U %S' \
		"${CLIENT_PIN[@]}" "$RINGBENCH" run --bootstrap "127.0.0.1:$PORT" --workload "$WORKLOADS/${workload%%@*}.yaml" \
		--label "$(label "$name")" --duration "$DURATION" --warmup "$warmup" --broker-pid "$PID" \
		--progress-interval 5s --json "$RUN/$name/$workload.json" "$@" 2>&1 | tee -a "$LOG"
	read -r busy1 total1 < <(cpu_jiffies)
	read -r wall user sys <"$RUN/$name/$workload.client"
	awk -v l0="$load0" -v l1="$(cut -d' ' -f1 /proc/loadavg)" -v b="$((busy1 - busy0))" -v t="$((total1 - total0))" -v n="$(nproc)" \
		-v wall="$wall" -v cpu="$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" \
		'BEGIN { printf "%s -> %s, %.1f of %d cores busy, ringbench %.1f (whole invocation)\n", l0, l1, (t > 0 ? b / t * n : 0), n, (wall > 0 ? cpu / wall : 0) }' >"$RUN/$name/$workload.load"
	echo "compare: $name: $workload: load $(cat "$RUN/$name/$workload.load")" | tee -a "$LOG"
}

# Rounds: every broker once per round, the order rotated each round (round_order), so each
# meets the machine in the same states (page cache, a VM's first-touch memory) as often as the
# others.
for round in $(seq "$ROUNDS"); do
	RUN="$OUT/r$round"
	for name in $(round_order "$round" $BROKERS); do
		start_broker "$name"
		warmup=$WARMUP
		[[ $name == kafka && $round == 1 ]] && warmup=$KAFKA_WARMUP
		if [[ $BASE == 1 ]]; then
			bench "$name" max-throughput "$warmup"
			if [[ -z $HALF_RATE ]]; then
				# Kafka is first (checked above): half of its maximum in round 1, for every run.
				HALF_RATE=$(jq -r '.publish.recordsPerSec / 2 | floor' "$RUN/$name/max-throughput.json")
				echo "compare: fixed rate for 1kb-fixed-rate-16p@half-kafka-max: $HALF_RATE records/s" | tee -a "$LOG"
			fi
			bench "$name" 1kb-fixed-rate-16p@half-kafka-max "$WARMUP" --rate "$HALF_RATE"
		fi
		for w in $EXTRA; do
			if [[ $w == *@kafka-rate ]]; then
				# At Kafka's own rate of round 1 (its run of the workload without the suffix,
				# earlier in EXTRA): latencies compared at equal work.
				bench "$name" "$w" "$WARMUP" --rate "$(jq -r '.publish.recordsPerSec | floor' "$OUT/r1/kafka/${w%%@*}.json")"
				continue
			fi
			bench "$name" "$w" "$WARMUP"
		done
		stop_broker "$name"
	done
done

WORKLOADS_RUN="$EXTRA"
[[ $BASE == 1 ]] && WORKLOADS_RUN="max-throughput 1kb-fixed-rate-16p@half-kafka-max $EXTRA"

# hwm NAME: the median over the rounds of the broker's lifetime peak RSS (VmHWM, KiB).
hwm() {
	local r
	for r in $(seq "$ROUNDS"); do awk '/VmHWM/ {print $2}' "$OUT/r$r/$1/process.txt"; done | sort -n |
		awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

# One comparison (table and chart) per workload from round 1, Kafka (the first broker) as the
# baseline of the ratios.
((${#first[@]} > 1)) || echo "compare: one broker, no comparison" | tee -a "$LOG"
for w in $WORKLOADS_RUN; do
	((${#first[@]} > 1)) || break
	files=()
	for name in $BROKERS; do
		files+=("$OUT/r1/$name/$w.json")
	done
	"$RINGBENCH" compare "${files[@]}" --out "$OUT/$w" | tee -a "$LOG"
done

# summary.md: medians (min-max) over the rounds, then every run.
{
	summary_warnings
	echo "Medians over $ROUNDS rounds (min-max), brokers interleaved in each round."
	echo
	echo "| workload | broker | publish rec/s | e2e p50 ms | e2e p99 ms | e2e p99.9 ms | broker CPU µs/record | peak RSS MiB (anon) |"
	echo "|---|---|--:|--:|--:|--:|--:|--:|"
	median_rows "$WORKLOADS_RUN" "$BROKERS"
	echo
	txns=""
	for w in $EXTRA; do
		if txn_workload "$w"; then txns="$txns $w"; fi
	done
	if [[ -n $txns ]]; then
		echo "Transactions: committed records, commits and the commit (EndTransaction) round trip; medians (min-max)."
		echo
		echo "| workload | broker | committed rec/s | commits/s | commit p50 ms | commit p99 ms | commit p99.9 ms | aborted |"
		echo "|---|---|--:|--:|--:|--:|--:|--:|"
		txn_rows "$txns" "$BROKERS"
		echo
	fi
	read -r first_workload _ <<<"$WORKLOADS_RUN"
	if jq -e '.probe != null' "$OUT/r1/${first[0]}/$first_workload.json" >/dev/null; then
		echo "Probe: the round trip of a Metadata request for no topics sent every 5 ms beside each workload, which costs a broker next to nothing: the floor under that run's latencies; medians (min-max)."
		echo
		echo "| workload | broker | probe p50 ms | probe p99 ms | probe p99.9 ms |"
		echo "|---|---|--:|--:|--:|"
		probe_rows "$WORKLOADS_RUN" "$BROKERS"
		echo
	fi
	echo "| round | workload | broker | publish rec/s | MB/s | publish p50 / p99 / p99.9 ms | e2e p50 / p99 / p99.9 ms | unsent | peak RSS (anon) MiB | CPU s (% of a core) | machine load |"
	echo "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"
	for round in $(seq "$ROUNDS"); do
		for w in $WORKLOADS_RUN; do
			for name in $BROKERS; do
				jq -r --arg r "$round" --arg w "$w" --arg b "$(label "$name")" '
					def f: if . == null then "-" elif . >= 100 then (. | round | tostring) else (. * 100 | round / 100 | tostring) end;
					"| \($r) | \($w) | \($b) | \(.publish.recordsPerSec | round) | \(.publish.mbPerSec | f) | " +
					"\(.publish.latency.p50Ms | f) / \(.publish.latency.p99Ms | f) / \(.publish.latency."p99.9Ms" | f) | " +
					"\(.e2e.latency.p50Ms | f) / \(.e2e.latency.p99Ms | f) / \(.e2e.latency."p99.9Ms" | f) | \(.unsent) | " +
					"\(.broker.peakRssBytes / 1048576 | round) (\(.broker.peakAnonRssBytes // 0 | . / 1048576 | round)) | \(.broker.cpuSeconds | f) (\(.broker.cpuPercent | round)) | \($load) |"
				' --arg load "$(cat "$OUT/r$round/$name/$w.load")" "$OUT/r$round/$name/$w.json"
			done
		done
	done
} >"$OUT/summary.md"
tee -a "$LOG" <"$OUT/summary.md"

# goals.txt: issue 9's goals as ratios of the medians, and issue 12's for a transactional
# workload in EXTRA (committed records per second and commit p99, ringbroker/Kafka).
if [[ " $BROKERS " == *" kafka "* && " $BROKERS " == *" uring "* ]]; then
	half=1kb-fixed-rate-16p@half-kafka-max
	r() { ratio "$(med "$1" "$3" "$4")" "$(med "$2" "$3" "$4")"; }
	{
		echo "goals (issue 9's without COMPARE_BASE=0), medians of $ROUNDS rounds (kafka = Apache Kafka 4.1.1, uring/netpoll = ringbroker)"
		if [[ $BASE == 1 ]]; then
			goal "max-throughput rec/s, uring/kafka" "$(r uring kafka max-throughput .publish.recordsPerSec)" ">=" 2
			if [[ " $BROKERS " == *" netpoll "* ]]; then
				goal "max-throughput rec/s, netpoll/kafka" "$(r netpoll kafka max-throughput .publish.recordsPerSec)" ">=" 1.5
				goal "max-throughput broker CPU per record, netpoll/kafka" "$(r netpoll kafka max-throughput "$CPUREC")" "<=" 0.5
			fi
			goal "max-throughput broker CPU per record, uring/kafka" "$(r uring kafka max-throughput "$CPUREC")" "<=" 0.5
			goal "e2e p99 at $HALF_RATE rec/s, uring/kafka" "$(r uring kafka "$half" .e2e.latency.p99Ms)" "<=" 0.5
			goal "e2e p99.9 at $HALF_RATE rec/s, uring/kafka" "$(r uring kafka "$half" '.e2e.latency."p99.9Ms"')" "<=" 0.5
			for w in $EXTRA; do
				txn_workload "$w" && continue # issue 12's, below
				goal "$w e2e p99, uring/kafka" "$(r uring kafka "$w" .e2e.latency.p99Ms)" "<=" 0.3
			done
			if [[ " $BROKERS " == *" netpoll "* ]]; then
				goal "max-throughput rec/s, uring/netpoll" "$(r uring netpoll max-throughput .publish.recordsPerSec)" ">=" 1.2
				for w in $WORKLOADS_RUN; do
					goal "$w e2e p99, uring/netpoll" "$(r uring netpoll "$w" .e2e.latency.p99Ms)" "<=" 1
				done
			fi
		fi
		for w in $EXTRA; do
			txn_workload "$w" || continue
			for name in uring netpoll; do
				[[ " $BROKERS " == *" $name "* ]] || continue
				[[ $w == *@kafka-rate ]] ||
					goal "issue 12: $w committed rec/s, $name/kafka" "$(r "$name" kafka "$w" .publish.recordsPerSec)" ">=" 1.5
				goal "issue 12: $w commit p99, $name/kafka" "$(r "$name" kafka "$w" .transactions.commitLatency.p99Ms)" "<=" 0.5
			done
		done
		if [[ $BASE == 1 ]]; then
			goal "peak RSS (lifetime VmHWM), uring/kafka" "$(ratio "$(hwm uring)" "$(hwm kafka)")" "<=" 1
			goal "peak anon RSS at max-throughput, uring/kafka" "$(r uring kafka max-throughput '(.broker.peakAnonRssBytes // 0)')" "<=" 0.25
			for name in $BROKERS; do
				p50=$(med "$name" max-throughput .e2e.latency.p50Ms)
				if [[ $name == kafka* ]]; then
					printf '%-58s %6.0f ms (for reference)\n' "max-throughput e2e p50, $(label "$name")" "$p50"
				else
					printf '%-58s %6.0f ms (goal < 1000: %s)\n' "max-throughput e2e p50, $(label "$name")" "$p50" \
						"$(awk -v v="$p50" 'BEGIN { print (v < 1000 ? "met" : "not met") }')"
				fi
			done
		fi
	} | tee "$OUT/goals.txt" | tee -a "$LOG"
fi

# Charts as PNG too, for documents, when a headless browser is at hand.
if command -v chromium >/dev/null && ((${#first[@]} > 1)); then
	for w in $WORKLOADS_RUN; do
		svg="$OUT/$w/latency.svg"
		height=$(grep -o 'height="[0-9]*"' "$svg" | head -1 | tr -dc 0-9)
		chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="960,$height" \
			--screenshot="$OUT/$w/latency.png" "file://$svg" >/dev/null 2>&1 ||
			echo "compare: rendering $svg as PNG failed" | tee -a "$LOG"
	done
fi
echo "compare: done; open $OUT/*/index.html" | tee -a "$LOG"
