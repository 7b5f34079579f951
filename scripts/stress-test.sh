#!/usr/bin/env bash
# The proof that the tests need no luck (docs/dev/testing.md): `make test` RUNS times in a row
# (default 3) on a fresh clone of the current commit, while BUSY busy loops (default 2, one
# per core of a CI machine) hold the CPUs. Every run's log goes to LOGS; the summary says how
# long each run took and how it ended. Exits non-zero when any run failed.
#
#   scripts/stress-test.sh            (make stress-test; RUNS, BUSY and LOGS from the environment)
#
# Run it with nice on a shared machine (nice make stress-test): the busy loops and the tests
# inherit the same niceness, so they still compete with each other as on a loaded CI runner.
set -euo pipefail

runs="${RUNS:-3}"
busy="${BUSY:-2}"
root="$(cd "$(dirname "$0")/.." && pwd)"
logs="${LOGS:-$root/.cache/stress}"
commit="$(git -C "$root" rev-parse HEAD)"

mkdir -p "$logs"
clone="$(mktemp -d "${TMPDIR:-/tmp}/zest-stress.XXXXXX")"
loops=()
cleanup() {
	for pid in "${loops[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$clone"
}
trap cleanup EXIT

echo "stress-test: a fresh clone of $commit in $clone"
git clone --quiet --no-local "$root" "$clone/zest"
git -C "$clone/zest" checkout --quiet --detach "$commit"
if [ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]; then
	echo "stress-test: note: the working tree has uncommitted changes; the clone tests the commit only"
fi

for _ in $(seq "$busy"); do
	( while :; do :; done ) &
	loops+=("$!")
done
echo "stress-test: $busy busy loops (pids ${loops[*]}) on $(nproc) CPUs; $runs runs of make test; logs in $logs"

failed=0
summary=()
for i in $(seq "$runs"); do
	log="$logs/run-$i.log"
	began=$(date +%s)
	if (cd "$clone/zest" && make test) >"$log" 2>&1; then outcome=passed; else outcome=FAILED; failed=$((failed + 1)); fi
	took=$(( $(date +%s) - began ))
	fails=$(grep -c -- '--- FAIL' "$log" || true)
	line=$(printf 'run %d: %s in %dm%02ds (%s failed tests; %s)' "$i" "$outcome" $((took / 60)) $((took % 60)) "$fails" "$log")
	summary+=("$line")
	echo "stress-test: $line"
	if [ "$outcome" = FAILED ]; then
		grep -E -- '^(--- FAIL|FAIL|panic:)' "$log" | head -20 || true
	fi
done

echo "stress-test: $commit, $busy busy loops, $(nproc) CPUs:"
printf '  %s\n' "${summary[@]}"
[ "$failed" -eq 0 ]
