#!/usr/bin/env bash
# Runs every go test -fuzz target in the module for FUZZTIME each.
# A failure leaves the crashing input under testdata/fuzz of its package.
set -euo pipefail
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-60s}
found=0
for dir in $(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' 2>/dev/null | xargs -r -n1 dirname | sort -u); do
	for t in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go | sed 's/^func //' | sort -u); do
		found=$((found + 1))
		echo "fuzz ./$dir $t ($FUZZTIME)"
		$GO test -run '^$' -fuzz "^${t}\$" -fuzztime "$FUZZTIME" "./$dir"
	done
done
echo "fuzz: $found targets, none failed"
