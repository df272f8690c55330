#!/usr/bin/env bash
# One test run again and again with one CPU kept busy, until it fails or RUNS
# runs have passed: how a flaky test is told from a sound one, and how its
# failure is caught to be read (tests/README.md, "Soak").
#
#   tests/soak/loop.sh PROGRAM FILTER RUNS [--seeds]
#
# PROGRAM: a GoogleTest program; FILTER: its --gtest_filter (every test it
# matches runs in each run); --seeds: run i sets DDPRUN_CHAOS_SEED=i, so the
# chaos test plays sequence 1, 2, ... RUNS. Exit status: 0 when every run
# passed; 1 at the first run that failed or skipped, with the end of its
# output here and all of it kept in soak-<filter>-<run>.log in the working
# directory.
set -euo pipefail

if (($# < 3)); then
  echo "usage: $0 PROGRAM FILTER RUNS [--seeds]" >&2
  exit 2
fi
program=$1
filter=$2
runs=$3
seeds=${4:-}

# The second CPU busy, as a loaded CI machine's would be.
busy() { while :; do :; done; }
busy &
busy_pid=$!
trap 'kill "$busy_pid" 2>/dev/null || true' EXIT

for ((run = 1; run <= runs; run++)); do
  log="soak-${filter//[^A-Za-z0-9]/_}-$run.log"
  if [[ $seeds == --seeds ]]; then
    export DDPRUN_CHAOS_SEED=$run
  fi
  started=$SECONDS
  status=0
  "$program" --gtest_filter="$filter" >"$log" 2>&1 || status=$?
  if ((status != 0)) || grep -q '^\[  SKIPPED \]' "$log" || ! grep -q '^\[  PASSED  \]' "$log"; then
    echo "run $run of $runs did not pass (exit status $status, $((SECONDS - started)) s): $PWD/$log"
    tail -n 60 "$log"
    exit 1
  fi
  rm -f "$log"
  echo "run $run of $runs passed ($((SECONDS - started)) s)"
done
echo "all $runs runs of $filter passed with one CPU kept busy"
