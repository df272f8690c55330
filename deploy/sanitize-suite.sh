#!/usr/bin/env bash
# Builds ddprun with AddressSanitizer and UndefinedBehaviorSanitizer
# (-DDDPRUN_SANITIZE=ON, in build-asan/ beside the plain build) and runs the
# suite under them with ctest, two tests at a time; ends with ctest's summary.
#
#   deploy/sanitize-suite.sh [LABEL...]
#
# LABEL: the ctest labels to run (unit, component, integration, compat);
# every one of them when none is given. DDPRUN_ASAN_BUILD_DIR overrides the
# build directory. Exit status: ctest's (0: every test passed), or the
# configure's or the build's when they fail.
#
# A sanitizer's report ends the program it is in: a test fails with the report
# in its output. The few tests whose measurement a sanitizer changes say so and
# adapt (README, Tests).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DDPRUN_ASAN_BUILD_DIR:-$root/build-asan}"
labels=("$@")
if ((${#labels[@]} == 0)); then
  labels=(unit component integration compat)
fi
label_regex="$(IFS='|'; echo "^(${labels[*]})\$")"

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$root" -B "$build" -G Ninja -DDDPRUN_SANITIZE=ON -DDDPRUN_WARNINGS_AS_ERRORS=ON \
  "${launcher[@]}"
cmake --build "$build"

# A UBSan report with the stack that led to it (ASan prints its own).
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
log="$build/sanitize-suite.log"
status=0  # ctest's (pipefail: tee does not hide it)
ctest --test-dir "$build" -j 2 -L "$label_regex" --output-on-failure 2>&1 | tee "$log" ||
  status=$?
echo
echo "sanitize-suite: labels ${labels[*]}; the whole output is in $log"
sed -n '/tests passed,/,$p' "$log"
exit "$status"
