#!/usr/bin/env bash
# Checks that every tracked C++ file (*.cpp, *.hpp, *.h) is formatted as the
# repository's .clang-format says, with Debian 12's clang-format 14: another
# version formats some constructs differently, so any other is refused.
#
#   deploy/check-format.sh          list the files clang-format would change
#   deploy/check-format.sh --fix    rewrite those files in place
#
# CLANG_FORMAT names the program (default: clang-format-14 if it is on PATH,
# else clang-format). Exit status: 0 when every file is formatted (with --fix:
# once the files that were not are rewritten, each one listed); 1 when files
# would change, each one listed; 2 for a bad argument or a missing or wrong
# clang-format, with one line saying which.
set -euo pipefail

usage="usage: deploy/check-format.sh [--fix]"
fix=0
case "$#:${1:-}" in
  0:) ;;
  1:--fix) fix=1 ;;
  1:-h | 1:--help) echo "$usage"; exit 0 ;;
  *) echo "check-format: unexpected argument(s): $*; $usage" >&2; exit 2 ;;
esac

cd "$(dirname "${BASH_SOURCE[0]}")/.."

clang_format="${CLANG_FORMAT:-}"
if [[ -z "$clang_format" ]]; then
  clang_format=clang-format
  if command -v clang-format-14 >/dev/null; then
    clang_format=clang-format-14
  fi
fi
if ! command -v "$clang_format" >/dev/null; then
  echo "check-format: $clang_format not found; deploy/install-deps.sh installs it" >&2
  exit 2
fi
version="$("$clang_format" --version)"
if [[ ! "$version" =~ version\ 14\. ]]; then
  echo "check-format: need clang-format 14 (Debian 12's), $clang_format is: $version" >&2
  exit 2
fi

unformatted=()
while IFS= read -r -d '' file; do
  [[ -f "$file" ]] || continue  # deleted in the work tree, not yet in the index
  if ! "$clang_format" --style=file "$file" | cmp -s - "$file"; then
    unformatted+=("$file")
  fi
done < <(git ls-files -z -- '*.cpp' '*.hpp' '*.h')

if ((${#unformatted[@]} == 0)); then
  exit 0
fi
if ((fix)); then
  "$clang_format" --style=file -i -- "${unformatted[@]}"
  printf 'check-format: formatted %s\n' "${unformatted[@]}"
  exit 0
fi
printf '%s\n' "${unformatted[@]}"
echo "check-format: ${#unformatted[@]} file(s) not formatted; deploy/check-format.sh --fix formats them" >&2
exit 1
