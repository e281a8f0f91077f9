#!/usr/bin/env bash
# `make profile`: a CPU profile of ringbroker under the max-throughput workload, unthrottled
# (the producers as fast as they go, so the broker at its busiest). Starts
# bin/ringbroker (IO=uring|netpoll, fresh data dir) with pprof.listen, runs bin/ringbench
# for DURATION, takes a profile of SECONDS in the middle, and writes cpu.prof and the
# `go tool pprof -top` listing into $OUT, printing the top lines and the shares of GC and of
# slice growth under the frame reader (issue 9's profile goals).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
IO="${IO:-uring}"
DURATION="${DURATION:-40s}"
SECONDS_PROF="${PROFILE_SECONDS:-20}"
OUT="${OUT:-results/profile-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
DATA=$(mktemp -d)
port() { echo $((20000 + RANDOM % 20000)); }
PORT=$(port)
PPORT=$((PORT + 1))
bin/ringbroker --io="$IO" --override "listeners=PLAINTEXT://127.0.0.1:$PORT" --override "log.dirs=$DATA" \
	--override "metrics.listen=" --override "pprof.listen=127.0.0.1:$PPORT" >"$OUT/broker.log" 2>&1 &
PID=$!
trap 'kill -KILL $PID 2>/dev/null || true; rm -rf "$DATA"' EXIT
for _ in $(seq 100); do
	curl -fs "http://127.0.0.1:$PPORT/debug/pprof/" >/dev/null 2>&1 && break
	sleep 0.1
done
bin/ringbench run --bootstrap "127.0.0.1:$PORT" --workload bench/workloads/max-throughput.yaml --unthrottled \
	--duration "$DURATION" --warmup 5s --quiet --json "$OUT/max-throughput.json" >"$OUT/ringbench.log" 2>&1 &
RB=$!
sleep 10
curl -fs -o "$OUT/cpu.prof" "http://127.0.0.1:$PPORT/debug/pprof/profile?seconds=$SECONDS_PROF"
wait "$RB" || true
kill -TERM "$PID"
wait "$PID" 2>/dev/null || true
"${GO:-go}" tool pprof -top bin/ringbroker "$OUT/cpu.prof" >"$OUT/top.txt" 2>/dev/null
head -40 "$OUT/top.txt"
echo "GC (runtime.gcBgMarkWorker): $("${GO:-go}" tool pprof -top bin/ringbroker "$OUT/cpu.prof" 2>/dev/null | awk '/gcBgMarkWorker/ {print $5; exit}')"
echo "growslice under wire.(*FrameReader).Feed: $("${GO:-go}" tool pprof -top -focus 'FrameReader' -show 'growslice' bin/ringbroker "$OUT/cpu.prof" 2>/dev/null | awk '/growslice/ {print $5; exit}')"
echo "profile: $OUT/cpu.prof (go tool pprof bin/ringbroker $OUT/cpu.prof)"
