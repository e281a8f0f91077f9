# Shared by tools/compare.sh (one node) and tools/compare-cluster.sh (three): sourced after
# the caller has set OUT, DATA, LOG, ROUNDS, LOAD_MAX, LOAD_WAIT, KAFKA_LIBS and RINGBROKER.

# Kafka's JVM options: the defaults of bin/kafka-server-start.sh and bin/kafka-run-class.sh.
KAFKA_JVM=(-Xmx1G -Xms1G -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
	-XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true)

die() {
	echo "compare: $*" >&2
	exit 1
}

# cpus_set VAR: the variable named VAR lists CPUs to run on (false when it is empty); dies
# when they are not a list taskset takes on this machine.
cpus_set() {
	local cpus=${!1:-}
	[[ -n $cpus ]] || return 1
	command -v taskset >/dev/null || die "$1 is set but taskset is missing (apt-get install util-linux)"
	taskset -c "$cpus" true 2>/dev/null || die "$1=$cpus is not a CPU list this machine can run on (taskset -c)"
}

# BROKER_CPUS and CLIENT_CPUS (CPU lists as taskset -c reads them: 0-3, 0,2; empty, the default,
# for every CPU) run the brokers under test, and the clients (ringbench, Kafka's tools), on those
# CPUs. On a machine with cores to spare, two disjoint lists give every broker the same cores
# and keep the clients' CPU off them, so that a run measures the brokers' ceiling rather than
# that of a machine the clients share: on two shared cores the client costs more per record
# than ringbroker does (BENCHMARKS.md, "The load generator's own cost").
BROKER_PIN=()
CLIENT_PIN=()
if cpus_set BROKER_CPUS; then BROKER_PIN=(taskset -c "$BROKER_CPUS"); fi
if cpus_set CLIENT_CPUS; then CLIENT_PIN=(taskset -c "$CLIENT_CPUS"); fi

# port_free PORT: nothing listens on 127.0.0.1:PORT.
port_free() {
	! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
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
	echo "cpus:   brokers on ${BROKER_CPUS:-all}, clients on ${CLIENT_CPUS:-all} (BROKER_CPUS, CLIENT_CPUS)"
	if reporting_on; then
		echo "free page reporting: on (order $(cat "$PAGE_REPORTING_ORDER")): memory the guest frees goes back to the hypervisor, whose next use costs a host fault; see BENCHMARKS.md, Reading the figures"
	fi
}

# PAGE_REPORTING_ORDER is where a guest kernel with free page reporting (virtio-balloon) keeps
# the smallest order of free blocks it reports; reporting is off above the largest order (10).
PAGE_REPORTING_ORDER=/sys/module/page_reporting/parameters/page_reporting_order

# reporting_on: this machine is a VM that hands memory freed in it back to the hypervisor.
# Then a page cache that grows into freed memory (Kafka's: it keeps what it writes) pays a host
# fault per page that a page cache reusing its pages (ringbroker's) does not, which bare metal
# does not have: Kafka's rate and CPU per record swing by 2x with it.
reporting_on() {
	[ -r "$PAGE_REPORTING_ORDER" ] && [ "$(cat "$PAGE_REPORTING_ORDER")" -le 10 ] &&
		ls /sys/bus/virtio/drivers/virtio_balloon/ 2>/dev/null | grep -q '^virtio'
}

# summary_warnings: the lines that open summary.md when its figures are not to be quoted as
# they stand: runs begun on a busy machine (BUSY lists their loads), a VM reporting freed
# memory to its hypervisor, or brokers and clients confined to CPU lists.
summary_warnings() {
	if [[ -n $BUSY ]]; then
		echo "**WARNING: measured on a busy machine (1-minute load$BUSY at or above $LOAD_MAX when runs began): do not quote these figures.**"
		echo
	fi
	if reporting_on; then
		echo "**Measured on a VM with free page reporting on: Kafka's page cache paid a host fault per new page, which bare metal does not (BENCHMARKS.md, Reading the figures); for bare-metal-like figures run with it off and the memory touched once.**"
		echo
	fi
	if [[ -n ${BROKER_CPUS:-}${CLIENT_CPUS:-} ]]; then
		echo "**Brokers on CPUs ${BROKER_CPUS:-all}, clients on CPUs ${CLIENT_CPUS:-all} (BROKER_CPUS, CLIENT_CPUS): compare these figures only with runs confined the same way.**"
		echo
	fi
}

# cpu_jiffies: busy and total CPU time of the whole machine so far (/proc/stat;
# iowait counts as idle, guest time is already inside user time).
cpu_jiffies() {
	awk '/^cpu / { t = 0; for (i = 2; i <= 9; i++) t += $i; print t - $5 - $6, t }' /proc/stat
}

# wait_quiet: waits (at most LOAD_WAIT s) until the 1-minute load is below LOAD_MAX; if it
# stays above, warns loudly, and the warning goes at the top of summary.md.
BUSY=""
wait_quiet() {
	local start=$SECONDS load
	load=$(cut -d' ' -f1 /proc/loadavg)
	while awk -v l="$load" -v m="$LOAD_MAX" 'BEGIN { exit !(l >= m) }'; do
		if ((SECONDS - start >= LOAD_WAIT)); then
			echo "compare: WARNING: measured on a busy machine: load $load >= $LOAD_MAX after ${LOAD_WAIT}s; do not quote these figures" | tee -a "$LOG" >&2
			BUSY="$BUSY $load"
			return
		fi
		echo "compare: load $load > $LOAD_MAX; waiting for a quiet machine" | tee -a "$LOG"
		sleep 5
		load=$(cut -d' ' -f1 /proc/loadavg)
	done
}

# round_order ROUND NAME...: the names rotated by ROUND-1 places (K U N, then U N K, then
# N K U, ...): round 1 keeps the given order (Kafka first, whose maximum sets the half rate),
# and over the rounds each broker runs first, and right after each of the others, as often as
# the rest, so no broker always meets what the one before it left (its writeback, its freed
# memory).
round_order() {
	local round=$1 i
	shift
	for ((i = 0; i < $#; i++)); do printf '%s ' "${@:(i + round - 1) % $# + 1:1}"; done
}

# med NAME WORKLOAD JQ: the median over the rounds of JQ applied to each run's JSON.
med() {
	local f=() r
	for r in $(seq "$ROUNDS"); do f+=("$OUT/r$r/$1/$2.json"); done
	jq -s "map($3) | sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end" "${f[@]}"
}
# range NAME WORKLOAD JQ: min-max over the rounds.
range() {
	local f=() r
	for r in $(seq "$ROUNDS"); do f+=("$OUT/r$r/$1/$2.json"); done
	jq -rs "map($3) | sort | \"\(.[0] * 100 | round / 100)-\(.[-1] * 100 | round / 100)\"" "${f[@]}"
}

# ratio A B: A / B with two decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# goal TEXT VALUE OP TARGET: one line of goals.txt.
goal() {
	local met
	met=$(awk -v v="$2" -v t="$4" -v op="$3" 'BEGIN { print ((op == ">=" ? v >= t : v <= t) ? "met" : "not met") }')
	printf '%-58s %6sx  (goal %s %s: %s)\n' "$1" "$2" "$3" "$4" "$met"
}

# log4j2_config LEVEL: a log4j2 configuration for Kafka's JVMs that logs LEVEL and above to the
# console.
log4j2_config() {
	cat <<-EOF
		status = warn
		appender.console.type = Console
		appender.console.name = CONSOLE
		appender.console.layout.type = PatternLayout
		appender.console.layout.pattern = [%d] %p %m (%c)%n
		rootLogger.level = $1
		rootLogger.appenderRef.console.ref = CONSOLE
	EOF
}

# pick_port: sets PORT, unless set, to a free port whose next one is free too (Kafka's
# controller).
pick_port() {
	[[ -z $PORT ]] || return 0
	for _ in {1..50}; do
		PORT=$((20000 + RANDOM % 20000))
		port_free "$PORT" && port_free $((PORT + 1)) && break
	done
}

# cpu_seconds PID: the process's CPU time so far (user + system), in seconds.
cpu_seconds() {
	awk -v hz="$(getconf CLK_TCK)" '{sub(/.*\) /, ""); printf "%.2f\n", ($12 + $13) / hz}' "/proc/$1/stat"
}

# new_cluster_id: a random cluster id in Kafka's base64 form.
new_cluster_id() {
	local id
	id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
	echo "A${id:1}" # a leading '-' would read as an option; 'A' keeps it 16 random-ish bytes
}

# kafka_node DIR ID VOTERS PORT CTLPORT CLUSTER_ID INTERNAL_RF BLOG: writes an Apache Kafka
# node's server.properties (broker and controller, data in DIR/data, internal topics of
# INTERNAL_RF replicas) and log4j config into DIR, formats it and starts it in the background,
# logging to BLOG; $! is its pid.
kafka_node() {
	local dir=$1 id=$2 voters=$3 port=$4 ctl=$5 cid=$6 rf=$7 blog=$8
	cat >"$dir/server.properties" <<-EOF
		process.roles=broker,controller
		node.id=$id
		controller.quorum.voters=$voters
		listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$ctl
		advertised.listeners=PLAINTEXT://127.0.0.1:$port
		controller.listener.names=CONTROLLER
		listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
		inter.broker.listener.name=PLAINTEXT
		log.dirs=$dir/data
		offsets.topic.replication.factor=$rf
		transaction.state.log.replication.factor=$rf
		transaction.state.log.min.isr=$((rf > 1 ? 2 : 1))
		share.coordinator.state.topic.replication.factor=$rf
		share.coordinator.state.topic.min.isr=$((rf > 1 ? 2 : 1))
	EOF
	log4j2_config info >"$dir/log4j2.properties"
	java -cp "$KAFKA_LIBS/*" -Dlog4j2.configurationFile="$dir/log4j2.properties" \
		kafka.tools.StorageTool format -t "$cid" -c "$dir/server.properties" >>"$blog" 2>&1 ||
		die "format Kafka storage failed: see $blog"
	"${BROKER_PIN[@]}" java "${KAFKA_JVM[@]}" -Dlog4j2.configurationFile="$dir/log4j2.properties" \
		-cp "$KAFKA_LIBS/*" kafka.Kafka "$dir/server.properties" >>"$blog" 2>&1 &
}

# CPUREC: broker CPU microseconds per published record, from a run's JSON.
CPUREC='(.broker.cpuSeconds / .publish.records * 1e6)'

# cell NAME WORKLOAD FMT JQ: one summary.md cell, the median over the rounds of JQ printed
# with FMT, then its min-max in parentheses.
cell() {
	# shellcheck disable=SC2059 # FMT is the caller's printf format for the median
	printf "$3 (%s)" "$(med "$1" "$2" "$4")" "$(range "$1" "$2" "$4")"
}

# median_rows "WORKLOADS" "NAMES": a summary.md row per workload and name (label NAME gives
# its column name): medians (min-max) over the rounds of the publish rate, the e2e p50, p99 and
# p99.9, broker CPU per record, and the peak RSS (anonymous).
median_rows() {
	local w name
	for w in $1; do
		for name in $2; do
			printf '| %s | %s | %s | %s | %s | %s | %s | %.0f (%.0f) |\n' "$w" "$(label "$name")" \
				"$(cell "$name" "$w" %.0f .publish.recordsPerSec)" "$(cell "$name" "$w" %.1f .e2e.latency.p50Ms)" \
				"$(cell "$name" "$w" %.1f .e2e.latency.p99Ms)" "$(cell "$name" "$w" %.1f '.e2e.latency."p99.9Ms"')" \
				"$(cell "$name" "$w" %.2f "$CPUREC")" \
				"$(med "$name" "$w" '.broker.peakRssBytes / 1048576')" "$(med "$name" "$w" '(.broker.peakAnonRssBytes // 0) / 1048576')"
		done
	done
}

# probe_rows "WORKLOADS" "NAMES": a summary.md row per workload and name: medians (min-max)
# over the rounds of the probe's round trip (ringbench --probe-interval: a Metadata request for
# no topics beside the workload), p50, p99 and p99.9, the floor under the run's latencies.
probe_rows() {
	local w name
	for w in $1; do
		for name in $2; do
			printf '| %s | %s | %s | %s | %s |\n' "$w" "$(label "$name")" \
				"$(cell "$name" "$w" %.2f .probe.latency.p50Ms)" "$(cell "$name" "$w" %.2f .probe.latency.p99Ms)" \
				"$(cell "$name" "$w" %.2f '.probe.latency."p99.9Ms"')"
		done
	done
}

# txn_rows "WORKLOADS" "NAMES": a summary.md row per transactional workload and name: medians
# (min-max) over the rounds of the committed records per second, the commits per second, the
# commit latency's p50, p99 and p99.9, and the aborted transactions.
txn_rows() {
	local w name
	for w in $1; do
		for name in $2; do
			printf '| %s | %s | %s | %s | %s | %s | %s | %.0f |\n' "$w" "$(label "$name")" \
				"$(cell "$name" "$w" %.0f .publish.recordsPerSec)" "$(cell "$name" "$w" %.1f .transactions.commitsPerSec)" \
				"$(cell "$name" "$w" %.2f .transactions.commitLatency.p50Ms)" "$(cell "$name" "$w" %.2f .transactions.commitLatency.p99Ms)" \
				"$(cell "$name" "$w" %.2f '.transactions.commitLatency."p99.9Ms"')" \
				"$(med "$name" "$w" .transactions.aborted)"
		done
	done
}

# label NAME: the column name of a broker in the comparison.
label() {
	case $1 in
	kafka) echo kafka-4.1.1 ;;
	*) echo "ringbroker-$1" ;;
	esac
}

# The one-node brokers of compare.sh and compare-tools.sh, which set RUN (the round's result
# directory), READY_TIMEOUT and STOP_TIMEOUT, and trap cleanup on EXIT.
PID=""
# start_broker NAME: starts the broker on $PORT with a fresh log directory and
# sets PID once it answers Metadata.
start_broker() {
	local name=$1 dir="$DATA/$1" blog="$RUN/$1/broker.log"
	rm -rf "$dir"
	mkdir -p "$dir" "$RUN/$name"
	port_free "$PORT" || die "port $PORT is in use"
	case $name in
	kafka)
		port_free $((PORT + 1)) || die "port $((PORT + 1)) is in use"
		kafka_node "$dir" 1 "1@127.0.0.1:$((PORT + 1))" "$PORT" $((PORT + 1)) "$(new_cluster_id)" 1 "$blog"
		;;
	uring | netpoll)
		"${BROKER_PIN[@]}" "$RINGBROKER" --io="$name" --override "listeners=PLAINTEXT://127.0.0.1:$PORT" \
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
		echo "cpu_seconds $(cpu_seconds "$PID")"
	} >"$RUN/$name/process.txt"
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
	echo "compare: $name stopped; $(tr '\n' ' ' <"$RUN/$name/process.txt")" | tee -a "$LOG"
}

cleanup() {
	if [[ -n $PID ]]; then
		kill -KILL "$PID" 2>/dev/null || true
	fi
}
