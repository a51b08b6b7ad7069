#!/usr/bin/env bash
# Runs every go test -fuzz target in the module for FUZZTIME each (a
# duration such as 60s, or a count of executions such as 5000x).
# A failure leaves the crashing input under testdata/fuzz of its package.
#
# FUZZTAGS are build tags for the fuzzed tests (make fuzz passes
# invariants, so that every input also runs the code's invariant checks).
#
# FUZZJOBS targets run at once (default: one per core),
# each with its share of the cores as fuzzing workers. A short run spends
# about as long building and starting each target as fuzzing it, and side
# by side those waits overlap.
#
# Go 1.26's fuzz coordinator can end a timed run with "context deadline
# exceeded" although its workers found nothing (golang/go#75804): the
# deadline fires while the coordinator is between steps. Such a run fuzzed
# for its whole time and wrote no crashing input, so it counts as passed. A
# run that writes a crashing input, or fails any other way, fails the whole
# run.
set -uo pipefail
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-60s}
FUZZTAGS=${FUZZTAGS:-}
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
FUZZJOBS=${FUZZJOBS:-$cores}
[ "$FUZZJOBS" -ge 1 ] 2>/dev/null || { echo "fuzz: FUZZJOBS must be a positive number, not '$FUZZJOBS'"; exit 2; }
workers=$((cores / FUZZJOBS))
[ "$workers" -ge 1 ] || workers=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

crashers() { find "$1/testdata/fuzz/$2" -type f 2>/dev/null | sort; }

# fuzz_one DIR TARGET N: fuzzes one target, writes its report to
# $work/N.out and "ok" or "failed" to $work/N.rc.
fuzz_one() {
	local dir=$1 t=$2 n=$3 before log=$work/$3.log
	before=$(crashers "$dir" "$t")
	{
		echo "fuzz ./$dir $t ($FUZZTIME)"
		if $GO test ${FUZZTAGS:+-tags "$FUZZTAGS"} -run '^$' -fuzz "^${t}\$" -fuzztime "$FUZZTIME" -parallel "$workers" "./$dir" >"$log" 2>&1; then
			tail -n 1 "$log"
			echo ok >"$work/$n.rc"
		elif [ "$(crashers "$dir" "$t")" = "$before" ] &&
			grep -q 'context deadline exceeded' "$log" &&
			! grep -qE 'panic:|Failing input|failure while testing seed corpus' "$log"; then
			echo "fuzz: $t ran its time with no crashing input (coordinator deadline report ignored)"
			echo ok >"$work/$n.rc"
		else
			cat "$log"
			echo "fuzz: $t in ./$dir FAILED"
			echo failed >"$work/$n.rc"
		fi
	} >"$work/$n.out"
	cat "$work/$n.out"
}

found=0
for dir in $(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' 2>/dev/null | xargs -r -n1 dirname | sort -u); do
	for t in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go | sed 's/^func //' | sort -u); do
		found=$((found + 1))
		while [ "$(jobs -rp | wc -l)" -ge "$FUZZJOBS" ]; do
			wait -n
		done
		fuzz_one "$dir" "$t" "$found" &
	done
done
wait
failed=0
for ((n = 1; n <= found; n++)); do
	[ "$(cat "$work/$n.rc" 2>/dev/null)" = ok ] || failed=$((failed + 1))
done
echo "fuzz: $found targets, $FUZZJOBS at a time, $failed failed"
[ $failed -eq 0 ]
