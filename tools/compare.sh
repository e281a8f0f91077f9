#!/usr/bin/env bash
# `make compare`: runs the same ringbench workloads against Apache Kafka 4.1.1
# (KRaft, single node), ringbroker with io_uring and ringbroker with netpoll,
# one broker after the other on this machine with their logs on the same disk,
# and writes the comparison (tables, HTML pages, latency charts) to $OUT.
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
#   EXTRA          workloads after max-throughput and the half-rate run
#                  (small-messages 100-partitions; "" for none)
#   BROKERS        which brokers, in order    (kafka uring netpoll)
#   HALF_RATE      fixed rate when Kafka is not in BROKERS (records/s)
#   PORT           client port of the broker under test (a free one; Kafka's controller PORT+1)
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
HALF_RATE="${HALF_RATE:-}"
PORT="${PORT:-}"
KAFKA_LIBS="$ROOT/.cache/kafka/libs"
WORKLOADS="$ROOT/bench/workloads"
RINGBENCH="${RINGBENCH:-$ROOT/bin/ringbench}"
RINGBROKER="${RINGBROKER:-$ROOT/bin/ringbroker}"
READY_TIMEOUT=180 # seconds for a broker to answer Metadata
STOP_TIMEOUT=60   # seconds for a clean shutdown after SIGTERM

# Kafka's JVM options: the defaults of bin/kafka-server-start.sh and bin/kafka-run-class.sh.
KAFKA_JVM=(-Xmx1G -Xms1G -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
	-XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true)

die() {
	echo "compare: $*" >&2
	exit 1
}

# port_free PORT: nothing listens on 127.0.0.1:PORT.
port_free() {
	! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

for tool in jq kcat java /usr/bin/time; do
	command -v "$tool" >/dev/null || die "$tool not found (make deps installs kcat and java; apt-get install jq time)"
done
[[ -x $RINGBENCH && -x $RINGBROKER ]] || die "$RINGBENCH or $RINGBROKER missing: run make build"
compgen -G "$KAFKA_LIBS/kafka_2.13-*.jar" >/dev/null || die "no Apache Kafka jars in $KAFKA_LIBS: run make deps-kafka"
read -ra first <<<"$BROKERS"
((${#first[@]} > 0)) || die "BROKERS is empty"
[[ ${first[0]:-} == kafka || -n $HALF_RATE ]] || die "BROKERS=\"$BROKERS\" does not start with kafka: set HALF_RATE"
[[ $(tr ' ' '\n' <<<"$BROKERS" | sed '/^$/d' | sort | uniq -d) == "" ]] || die "BROKERS=\"$BROKERS\" names a broker twice"

if [[ -z $PORT ]]; then
	for _ in {1..50}; do
		PORT=$((20000 + RANDOM % 20000))
		port_free "$PORT" && port_free $((PORT + 1)) && break
	done
fi

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

# label NAME: the column name of a broker in the comparison.
label() {
	case $1 in
	kafka) echo kafka-4.1.1 ;;
	*) echo "ringbroker-$1" ;;
	esac
}

# machine: what the numbers were measured on.
machine() {
	echo "date:   $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "host:   $(uname -n), kernel $(uname -r)"
	echo "cpu:    $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')$(lscpu 2>/dev/null | awk -F': *' '/^Hypervisor vendor|^L3 cache/ {printf ", %s %s", $1, $2}')"
	echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
	local dev
	dev=$(df --output=source "$DATA" | tail -1)
	echo "disk:   $(df -h --output=source,fstype,size "$DATA" | tail -1 | tr -s ' '), rotational=$(cat "/sys/block/${dev#/dev/}/queue/rotational" 2>/dev/null || echo unknown)"
	echo "java:   $(java -version 2>&1 | head -1)"
	echo "go:     $(go version 2>/dev/null || echo unknown)"
	echo "tree:   $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(git status --porcelain 2>/dev/null | wc -l) files changed since"
	echo "ringbroker binary: $(sha256sum "$RINGBROKER" | cut -c1-16)"
	echo "load:   $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) before the run"
}
machine | tee "$OUT/machine.txt" | tee -a "$LOG"

PID=""
# start_broker NAME: starts the broker on $PORT with a fresh log directory and
# sets PID once it answers Metadata.
start_broker() {
	local name=$1 dir="$DATA/$1" blog="$OUT/$1/broker.log"
	rm -rf "$dir"
	mkdir -p "$dir" "$OUT/$name"
	port_free "$PORT" || die "port $PORT is in use"
	case $name in
	kafka)
		port_free $((PORT + 1)) || die "port $((PORT + 1)) is in use"
		cat >"$dir/server.properties" <<-EOF
			process.roles=broker,controller
			node.id=1
			controller.quorum.voters=1@127.0.0.1:$((PORT + 1))
			listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$((PORT + 1))
			advertised.listeners=PLAINTEXT://127.0.0.1:$PORT
			controller.listener.names=CONTROLLER
			listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
			inter.broker.listener.name=PLAINTEXT
			log.dirs=$dir/data
			offsets.topic.replication.factor=1
			transaction.state.log.replication.factor=1
			transaction.state.log.min.isr=1
			share.coordinator.state.topic.replication.factor=1
			share.coordinator.state.topic.min.isr=1
		EOF
		cat >"$dir/log4j2.properties" <<-EOF
			status = warn
			appender.console.type = Console
			appender.console.name = CONSOLE
			appender.console.layout.type = PatternLayout
			appender.console.layout.pattern = [%d] %p %m (%c)%n
			rootLogger.level = info
			rootLogger.appenderRef.console.ref = CONSOLE
		EOF
		local id
		id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
		id="A${id:1}" # a leading '-' would read as an option; 'A' keeps it 16 random-ish bytes
		java -cp "$KAFKA_LIBS/*" -Dlog4j2.configurationFile="$dir/log4j2.properties" \
			kafka.tools.StorageTool format -t "$id" -c "$dir/server.properties" >>"$blog" 2>&1 ||
			die "format Kafka storage failed: see $blog"
		java "${KAFKA_JVM[@]}" -Dlog4j2.configurationFile="$dir/log4j2.properties" \
			-cp "$KAFKA_LIBS/*" kafka.Kafka "$dir/server.properties" >>"$blog" 2>&1 &
		;;
	uring | netpoll)
		"$RINGBROKER" --io="$name" --override "listeners=PLAINTEXT://127.0.0.1:$PORT" \
			--override "log.dirs=$dir/data" --override "metrics.listen=" >>"$blog" 2>&1 &
		;;
	*) die "unknown broker $name: want kafka, uring or netpoll" ;;
	esac
	PID=$!
	local start=$SECONDS
	until kcat -b "127.0.0.1:$PORT" -L -m 2 2>/dev/null | grep -q '1 brokers'; do
		kill -0 "$PID" 2>/dev/null || die "$name exited during start: see $blog"
		((SECONDS - start < READY_TIMEOUT)) || die "$name not ready within ${READY_TIMEOUT}s: see $blog"
		sleep 0.2
	done
	echo "compare: $name (pid $PID) ready on 127.0.0.1:$PORT in $((SECONDS - start))s" | tee -a "$LOG"
}

# stop_broker NAME: records the broker's lifetime peak RSS and CPU time, then
# stops it with SIGTERM and removes its data.
stop_broker() {
	local name=$1
	{
		echo "pid $PID"
		grep -E '^(VmHWM|VmRSS|RssAnon|RssFile|Threads)' "/proc/$PID/status"
		awk -v hz="$(getconf CLK_TCK)" '{sub(/.*\) /, ""); printf "cpu_seconds %.2f\n", ($12 + $13) / hz}' "/proc/$PID/stat"
	} >"$OUT/$name/process.txt"
	kill -TERM "$PID"
	local start=$SECONDS
	while kill -0 "$PID" 2>/dev/null; do
		((SECONDS - start < STOP_TIMEOUT)) || {
			kill -KILL "$PID"
			echo "compare: $name did not stop within ${STOP_TIMEOUT}s; killed" | tee -a "$LOG"
		}
		sleep 0.2
	done
	wait "$PID" 2>/dev/null || true # Kafka exits 143 after a clean SIGTERM shutdown
	PID=""
	rm -rf "${DATA:?}/$name"
	echo "compare: $name stopped; $(tr '\n' ' ' <"$OUT/$name/process.txt")" | tee -a "$LOG"
}

cleanup() {
	if [[ -n $PID ]]; then
		kill -KILL "$PID" 2>/dev/null || true
	fi
}
trap cleanup EXIT

# cpu_jiffies: busy and total CPU time of the whole machine so far (/proc/stat;
# iowait counts as idle, guest time is already inside user time).
cpu_jiffies() {
	awk '/^cpu / { t = 0; for (i = 2; i <= 9; i++) t += $i; print t - $5 - $6, t }' /proc/stat
}

# bench NAME WORKLOAD WARMUP [ringbench flags]: one measured run into
# $OUT/NAME/WORKLOAD.json, and into WORKLOAD.load how busy the machine was:
# the 1-minute load average before and after, the cores kept busy on average
# over the run by everything (broker, ringbench and anything else), and the
# cores ringbench itself kept busy.
bench() {
	local name=$1 workload=$2 warmup=$3 load0 busy0 total0 busy1 total1 wall user sys
	shift 3
	echo "compare: $name: $workload (warmup $warmup, measured $DURATION) $*" | tee -a "$LOG"
	load0=$(cut -d' ' -f1 /proc/loadavg)
	read -r busy0 total0 < <(cpu_jiffies)
	# GNU time records ringbench's own CPU use: the client shares the machine.
	/usr/bin/time -o "$OUT/$name/$workload.client" -f '%e %U %S' \
		"$RINGBENCH" run --bootstrap "127.0.0.1:$PORT" --workload "$WORKLOADS/${workload%%@*}.yaml" \
		--label "$(label "$name")" --duration "$DURATION" --warmup "$warmup" --broker-pid "$PID" \
		--progress-interval 5s --json "$OUT/$name/$workload.json" "$@" 2>&1 | tee -a "$LOG"
	read -r busy1 total1 < <(cpu_jiffies)
	read -r wall user sys <"$OUT/$name/$workload.client"
	awk -v l0="$load0" -v l1="$(cut -d' ' -f1 /proc/loadavg)" -v b="$((busy1 - busy0))" -v t="$((total1 - total0))" -v n="$(nproc)" \
		-v wall="$wall" -v cpu="$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" \
		'BEGIN { printf "%s -> %s, %.1f of %d cores busy, ringbench %.1f\n", l0, l1, (t > 0 ? b / t * n : 0), n, (wall > 0 ? cpu / wall : 0) }' >"$OUT/$name/$workload.load"
	echo "compare: $name: $workload: load $(cat "$OUT/$name/$workload.load")" | tee -a "$LOG"
}

for name in $BROKERS; do
	start_broker "$name"
	warmup=$WARMUP
	[[ $name == kafka ]] && warmup=$KAFKA_WARMUP
	bench "$name" max-throughput "$warmup"
	if [[ -z $HALF_RATE ]]; then
		# Kafka is first (checked above): half of its maximum.
		HALF_RATE=$(jq -r '.publish.recordsPerSec / 2 | floor' "$OUT/$name/max-throughput.json")
		echo "compare: fixed rate for 1kb-fixed-rate-16p@half-kafka-max: $HALF_RATE records/s" | tee -a "$LOG"
	fi
	bench "$name" 1kb-fixed-rate-16p@half-kafka-max "$WARMUP" --rate "$HALF_RATE"
	for w in $EXTRA; do
		bench "$name" "$w" "$WARMUP"
	done
	stop_broker "$name"
done

# One comparison per workload, Kafka (the first broker) as the baseline of the ratios.
((${#first[@]} > 1)) || echo "compare: one broker, no comparison" | tee -a "$LOG"
for w in max-throughput 1kb-fixed-rate-16p@half-kafka-max $EXTRA; do
	((${#first[@]} > 1)) || break
	files=()
	for name in $BROKERS; do
		files+=("$OUT/$name/$w.json")
	done
	"$RINGBENCH" compare "${files[@]}" --out "$OUT/$w" | tee -a "$LOG"
done

# summary.md: one Markdown table of every run, for BENCHMARKS.md.
{
	echo "| workload | broker | publish rec/s | MB/s | publish p50 / p99 / p99.9 ms | e2e p50 / p99 / p99.9 ms | unsent | peak RSS (anon) MiB | CPU s (% of a core) | machine load |"
	echo "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"
	for w in max-throughput 1kb-fixed-rate-16p@half-kafka-max $EXTRA; do
		for name in $BROKERS; do
			jq -r --arg w "$w" --arg b "$(label "$name")" '
				def f: if . == null then "-" elif . >= 100 then (. | round | tostring) else (. * 100 | round / 100 | tostring) end;
				"| \($w) | \($b) | \(.publish.recordsPerSec | round) | \(.publish.mbPerSec | f) | " +
				"\(.publish.latency.p50Ms | f) / \(.publish.latency.p99Ms | f) / \(.publish.latency."p99.9Ms" | f) | " +
				"\(.e2e.latency.p50Ms | f) / \(.e2e.latency.p99Ms | f) / \(.e2e.latency."p99.9Ms" | f) | \(.unsent) | " +
				"\(.broker.peakRssBytes / 1048576 | round) (\(.broker.peakAnonRssBytes // 0 | . / 1048576 | round)) | \(.broker.cpuSeconds | f) (\(.broker.cpuPercent | round)) | \($load) |"
			' --arg load "$(cat "$OUT/$name/$w.load")" "$OUT/$name/$w.json"
		done
	done
} >"$OUT/summary.md"
tee -a "$LOG" <"$OUT/summary.md"

# goals.txt: the issue's goals as ratios of this one run.
if [[ " $BROKERS " == *" kafka "* && " $BROKERS " == *" uring "* ]]; then
	q() { jq -r "$2" "$OUT/$1"; }
	ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
	half=1kb-fixed-rate-16p@half-kafka-max
	{
		echo "goals of issue 3, this run (kafka = Apache Kafka 4.1.1, uring/netpoll = ringbroker)"
		echo "max produce throughput, uring/kafka:      $(ratio "$(q uring/max-throughput.json .publish.recordsPerSec)" "$(q kafka/max-throughput.json .publish.recordsPerSec)")x   (goal >= 2)"
		echo "e2e p99 at $HALF_RATE rec/s, uring/kafka:    $(ratio "$(q "uring/$half.json" '.e2e."latency".p99Ms')" "$(q "kafka/$half.json" '.e2e.latency.p99Ms')")x   (goal <= 0.20)"
		echo "e2e p99.9 at $HALF_RATE rec/s, uring/kafka:  $(ratio "$(q "uring/$half.json" '.e2e.latency."p99.9Ms"')" "$(q "kafka/$half.json" '.e2e.latency."p99.9Ms"')")x   (goal <= 0.10)"
		echo "peak RSS (lifetime VmHWM), uring/kafka:   $(ratio "$(awk '/VmHWM/ {print $2}' "$OUT/uring/process.txt")" "$(awk '/VmHWM/ {print $2}' "$OUT/kafka/process.txt")")x   (goal <= 0.25)"
		echo "peak RSS at max throughput, uring/kafka:  $(ratio "$(q uring/max-throughput.json .broker.peakRssBytes)" "$(q kafka/max-throughput.json .broker.peakRssBytes)")x   (goal <= 0.25)"
		echo "  of it anonymous (heap), uring/kafka:    $(ratio "$(q uring/max-throughput.json .broker.peakAnonRssBytes)" "$(q kafka/max-throughput.json .broker.peakAnonRssBytes)")x"
		if [[ " $BROKERS " == *" netpoll "* ]]; then
			echo "max produce throughput, uring/netpoll:    $(ratio "$(q uring/max-throughput.json .publish.recordsPerSec)" "$(q netpoll/max-throughput.json .publish.recordsPerSec)")x   (goal > 1)"
			echo "e2e p99 at $HALF_RATE rec/s, uring/netpoll:  $(ratio "$(q "uring/$half.json" '.e2e.latency.p99Ms')" "$(q "netpoll/$half.json" '.e2e.latency.p99Ms')")x   (goal < 1)"
		fi
	} | tee "$OUT/goals.txt" | tee -a "$LOG"
fi

# Charts as PNG too, for documents, when a headless browser is at hand.
if command -v chromium >/dev/null && ((${#first[@]} > 1)); then
	for w in max-throughput 1kb-fixed-rate-16p@half-kafka-max $EXTRA; do
		svg="$OUT/$w/latency.svg"
		height=$(grep -o 'height="[0-9]*"' "$svg" | head -1 | tr -dc 0-9)
		chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="960,$height" \
			--screenshot="$OUT/$w/latency.png" "file://$svg" >/dev/null 2>&1 ||
			echo "compare: rendering $svg as PNG failed" | tee -a "$LOG"
	done
fi
echo "compare: done; open $OUT/*/index.html" | tee -a "$LOG"
