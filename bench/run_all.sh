#!/usr/bin/env bash
# Run every benchmark under bench/ in turn and print their figures (make bench runs this inside
# the loopback-only namespace). Targets are printed beside the figures, never asserted as tests.
# Usage: bench/run_all.sh PYTHON   (each benchmark takes its own options when run alone)
set -uo pipefail
py=${1:?usage: bench/run_all.sh PYTHON}
shift
cd "$(dirname "$0")/.." || exit 1
status=0
for bench in bench/*_bench.py bench/watcher_kill_soak.py bench/eda_latency.py bench/event_grid_latency.py; do
  echo "=== $bench"
  "$py" "$bench" || { echo "=== $bench exited with $?"; status=1; }
done
exit $status
