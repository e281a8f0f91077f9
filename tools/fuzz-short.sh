#!/usr/bin/env bash
# Runs every Fuzz* target in the module for $FUZZTIME each. Targets are found with
# `go test -list '^Fuzz'`, so a new fuzz target is picked up without editing this file.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO="${GO:-go}"
GOLDFLAGS="${GOLDFLAGS:--ldflags=-checklinkname=0}"
FUZZTIME="${FUZZTIME:-5s}"

ran=0
failed=0
for pkg in $("$GO" list ./...); do
	# -list prints matching names, then an "ok" line; keep only the names.
	if ! listing=$("$GO" test "$GOLDFLAGS" -list '^Fuzz' "$pkg" 2>&1); then
		echo "$listing"
		echo "--- FAIL: listing fuzz targets of $pkg"
		failed=$((failed + 1))
		continue
	fi
	targets=$(grep -E '^Fuzz' <<<"$listing" || true)
	for target in $targets; do
		echo "=== fuzz $pkg $target ($FUZZTIME)"
		if "$GO" test "$GOLDFLAGS" -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg"; then
			ran=$((ran + 1))
		else
			echo "--- FAIL: fuzz $pkg $target"
			failed=$((failed + 1))
		fi
	done
done
echo "fuzz-short: $ran passed, $failed failed"
[ "$failed" -eq 0 ]
