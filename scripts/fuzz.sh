#!/usr/bin/env bash
# Runs every go test -fuzz target in the module for FUZZTIME each.
# A failure leaves the crashing input under testdata/fuzz of its package.
#
# Go 1.26's fuzz coordinator can fail a run with "context deadline exceeded"
# on a loaded machine without finding anything (golang/go#75804). A target
# that fails without writing a new crashing input is run once more; a target
# that writes one, or fails twice, fails the whole run.
set -uo pipefail
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-60s}
found=0
failed=0

crashers() { find "$1/testdata/fuzz/$2" -type f 2>/dev/null | sort; }

for dir in $(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' 2>/dev/null | xargs -r -n1 dirname | sort -u); do
	for t in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go | sed 's/^func //' | sort -u); do
		found=$((found + 1))
		before=$(crashers "$dir" "$t")
		for try in 1 2; do
			echo "fuzz ./$dir $t ($FUZZTIME, try $try)"
			if $GO test -run '^$' -fuzz "^${t}\$" -fuzztime "$FUZZTIME" "./$dir"; then
				break
			fi
			if [ "$(crashers "$dir" "$t")" != "$before" ] || [ $try = 2 ]; then
				echo "fuzz: $t in ./$dir FAILED"
				failed=$((failed + 1))
				break
			fi
			echo "fuzz: $t failed without a crashing input; running it again"
		done
	done
done
echo "fuzz: $found targets, $failed failed"
[ $failed -eq 0 ]
