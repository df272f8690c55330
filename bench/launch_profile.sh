#!/bin/sh
# Where a ddprun launch's time goes, as the numbers in docs/benchmarks.md were
# found: perf's CPU profile over many launches (user and kernel, by program,
# library and function) and one launch's system calls with their times.
#
#   bench/launch_profile.sh [DDPRUN] [WORKER...]
#
# DDPRUN defaults to build/launcher/ddprun, the workers to `true` (with
# --no-python). RUNS (default 100) launches are profiled; NPROC (default 4)
# workers each. Everything goes to OUT (default: a new temporary directory),
# whose path is printed first. Needs perf and strace (deploy/install-deps.sh
# installs both) and, for kernel stacks, root or perf_event_paranoid <= 1.
set -eu

ddprun=${1:-build/launcher/ddprun}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || set -- --no-python true
runs=${RUNS:-100}
nproc=${NPROC:-4}
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/launch_profile.XXXXXX")}
mkdir -p "$out"
echo "launch_profile: output in $out"

# perf follows every child (the guardian, the agent, the workers) from the
# shell loop down.
export ddprun nproc out
perf record -q -F 4999 -g -o "$out/perf.data" -- sh -c '
  i=0
  while [ "$i" -lt '"$runs"' ]; do
    "$ddprun" --standalone --nproc-per-node "$nproc" --log-dir "$out/logs" "$@" >/dev/null 2>&1
    i=$((i + 1))
  done' sh "$@"
perf report -i "$out/perf.data" --no-children --sort comm,dso --stdio 2>/dev/null |
  grep -v '^$' | head -40 >"$out/by_dso.txt"
perf report -i "$out/perf.data" --no-children --comm ddprun --sort dso,sym --stdio -g none \
  2>/dev/null | grep -v '^$' | head -80 >"$out/ddprun_symbols.txt"

# One launch's system calls: -r gives each call's time since the one before,
# -tt the wall clock to line the processes up.
strace -f -tt -r -o "$out/strace.txt" \
  "$ddprun" --standalone --nproc-per-node "$nproc" --log-dir "$out/logs" "$@" >/dev/null 2>&1
strace -f -c -o "$out/strace_counts.txt" \
  "$ddprun" --standalone --nproc-per-node "$nproc" --log-dir "$out/logs" "$@" >/dev/null 2>&1

cat "$out/by_dso.txt"
echo
cat "$out/ddprun_symbols.txt"
echo
head -30 "$out/strace_counts.txt"
