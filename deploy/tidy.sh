#!/usr/bin/env bash
# Runs clang-tidy 14 (Debian 12's), with the repository's .clang-tidy, over
# every .cpp of the product (launcher/, rendezvous/, proto/, worker/; not
# tests/ nor bench/) in a build's compile database, and lists its findings.
#
#   deploy/tidy.sh [BUILD_DIR]
#
# BUILD_DIR: a configured and built tree (the generated headers must exist),
# `build` by default; its sources are the tree CMake configured it from.
# DDPRUN_TIDY_JOBS: how many files at once (default: the number of CPUs).
# CLANG_TIDY names the program (default: clang-tidy-14 if it is on PATH, else
# clang-tidy). Exit status: 0 with no finding; 1 with findings, each listed
# once, then a count per check; 2 for a bad argument, a missing compile
# database or a missing or wrong clang-tidy, with one line saying which.
#
# Time: about 31 minutes of CPU for the 131 files (the 12 of worker/ that
# include LibTorch take over a minute each), so about 16 minutes on 2 free
# cores; one file at a time on 2 cores busy with other builds, 46 to 65
# minutes. That is why CI does not run it.
#
# clang 14 cannot parse LibTorch 1.13's headers as C++20 (ATen's List.h uses
# std::vector<IValue> before IValue is complete, which libstdc++ 12's
# constexpr vector makes an error for clang; GCC accepts it). Those errors,
# all in LibTorch's and the standard library's headers, are not findings:
# clang recovers and the rest of each such file is checked. The count of
# files they occur in is printed.
set -euo pipefail

usage="usage: deploy/tidy.sh [BUILD_DIR]"
if (($# > 1)) || [[ "${1:-}" == -* ]]; then
  [[ "${1:-}" == -h || "${1:-}" == --help ]] && { echo "$usage"; exit 0; }
  echo "tidy: unexpected argument(s): $*; $usage" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
database="$build/compile_commands.json"
if [[ ! -f "$database" || ! -f "$build/CMakeCache.txt" ]]; then
  echo "tidy: no compile database in $build; configure and build first (README, The two commands)" >&2
  exit 2
fi
jobs="${DDPRUN_TIDY_JOBS:-$(nproc)}"
if [[ ! "$jobs" =~ ^[1-9][0-9]*$ ]]; then
  echo "tidy: DDPRUN_TIDY_JOBS must be a positive number of files, not '$jobs'" >&2
  exit 2
fi

clang_tidy="${CLANG_TIDY:-}"
if [[ -z "$clang_tidy" ]]; then
  clang_tidy=clang-tidy
  if command -v clang-tidy-14 >/dev/null; then
    clang_tidy=clang-tidy-14
  fi
fi
if ! command -v "$clang_tidy" >/dev/null; then
  echo "tidy: $clang_tidy not found; deploy/install-deps.sh installs it" >&2
  exit 2
fi
if [[ ! "$("$clang_tidy" --version)" =~ version\ 14\. ]]; then
  echo "tidy: need clang-tidy 14 (Debian 12's; .clang-tidy's checks are chosen for it)," \
    "$clang_tidy is: $("$clang_tidy" --version | grep -i version)" >&2
  exit 2
fi

# The sources the build was configured from: this checkout, or another one.
sources="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")"
mapfile -t units < <(python3 - "$database" "$sources" <<'EOF'
import json, os, re, sys
database, sources = sys.argv[1], os.path.realpath(sys.argv[2])
product = re.compile(r"(launcher|rendezvous|proto|worker)/.*\.cpp")
units = set()
for entry in json.load(open(database)):
    path = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
    relative = os.path.relpath(path, sources)
    if product.fullmatch(relative):
        units.add(path)
print("\n".join(sorted(units)))
EOF
)
if ((${#units[@]} == 0)); then
  echo "tidy: no product .cpp of $sources in $database" >&2
  exit 2
fi

logs="$(mktemp -d "${TMPDIR:-/tmp}/ddprun-tidy.XXXXXX")"
trap 'rm -rf "$logs"' EXIT
echo "tidy: $clang_tidy over ${#units[@]} files of $sources, $jobs at a time"
start=$SECONDS
for i in "${!units[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do
    wait -n || true
  done
  # -ferror-limit=0: clang stops checking a file after 20 errors otherwise.
  (
    status=0
    "$clang_tidy" --quiet -p "$build" --config-file="$root/.clang-tidy" \
      --extra-arg=-ferror-limit=0 "${units[$i]}" >"$logs/$i.log" 2>&1 || status=$?
    echo "$status" >"$logs/$i.status"
  ) &
done
wait
elapsed=$((SECONDS - start))
echo "tidy: done in $((elapsed / 60)) min $((elapsed % 60)) s"

# A diagnostic: `path:line:column: error: message [check,-warnings-as-errors]`;
# a header's is reported by every file that includes it, so each is kept once.
# A finding is every diagnostic but a clang error outside the sources.
diagnostic='^[^ ]+:[0-9]+:[0-9]+: (warning|error): .* \[[^]]+\]$'
library_error() { awk -v sources="$sources/" \
  '/ error: .* \[clang-diagnostic-error\]$/ && index($0, sources) != 1' "$@"; }
library_files=0
failed=0
for i in "${!units[@]}"; do
  log="$logs/$i.log"
  if [[ -n "$(library_error "$log")" ]]; then
    library_files=$((library_files + 1))
  fi
  status="$(cat "$logs/$i.status")"
  if [[ "$status" != 0 ]] && ! grep -qE "$diagnostic" "$log"; then
    failed=$((failed + 1))
    if ((failed <= 3)); then  # the first few say why; the rest are counted
      echo "tidy: clang-tidy failed on ${units[$i]} (status $status):"
      tail -n 10 "$log"
    fi
  fi
done
if ((failed > 0)); then
  echo "tidy: clang-tidy failed on $failed file(s) without a finding to show for it"
fi
grep -hE "$diagnostic" "$logs"/*.log | sort -u | grep -vxFf <(library_error "$logs"/*.log) \
  >"$logs/findings" || true

if ((library_files > 0)); then
  echo "tidy: $library_files file(s) had clang errors in LibTorch's or the standard library's" \
    "headers (LibTorch 1.13 under clang 14), not counted as findings"
fi
if [[ -s "$logs/findings" ]]; then
  cat "$logs/findings"
  echo "tidy: $(wc -l <"$logs/findings") finding(s), by check:"
  sed -E 's/.*\[([^],]+)[],]?[^]]*\]$/\1/' "$logs/findings" | sort | uniq -c | sort -rn
fi
if [[ -s "$logs/findings" ]] || ((failed > 0)); then
  exit 1
fi
echo "tidy: no finding"
