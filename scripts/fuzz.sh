#!/usr/bin/env bash
# Runs every go test -fuzz target in the module for FUZZTIME each (a
# duration such as 60s, or a count of executions such as 5000x).
# A failure leaves the crashing input under testdata/fuzz of its package.
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
found=0
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

crashers() { find "$1/testdata/fuzz/$2" -type f 2>/dev/null | sort; }

for dir in $(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' 2>/dev/null | xargs -r -n1 dirname | sort -u); do
	for t in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go | sed 's/^func //' | sort -u); do
		found=$((found + 1))
		before=$(crashers "$dir" "$t")
		echo "fuzz ./$dir $t ($FUZZTIME)"
		if $GO test -run '^$' -fuzz "^${t}\$" -fuzztime "$FUZZTIME" "./$dir" >"$log" 2>&1; then
			tail -n 1 "$log"
			continue
		fi
		if [ "$(crashers "$dir" "$t")" = "$before" ] &&
			grep -q 'context deadline exceeded' "$log" &&
			! grep -qE 'panic:|Failing input|failure while testing seed corpus' "$log"; then
			echo "fuzz: $t ran its time with no crashing input (coordinator deadline report ignored)"
			continue
		fi
		cat "$log"
		echo "fuzz: $t in ./$dir FAILED"
		failed=$((failed + 1))
	done
done
echo "fuzz: $found targets, $failed failed"
[ $failed -eq 0 ]
