#!/bin/sh
# help2man's view of an argparse-style program: runs $ARGPARSE_PROGRAM with the
# given arguments and rewrites argparse's usage paragraph (which ddprun's
# --help keeps for torchrun's users) as help2man reads one: "Usage:", not
# "usage:", and on one line, since help2man takes only continuation lines
# that repeat the program's name. Everything else passes through untouched.
set -e
output=$("$ARGPARSE_PROGRAM" "$@")
printf '%s\n' "$output" | awk '
  NR == 1 && sub(/^usage:/, "Usage:") { usage = $0; next }
  usage != "" && /^ +[^ ]/ { sub(/^ +/, ""); usage = usage " " $0; next }
  usage != "" { print usage; usage = "" }
  { print }
  END { if (usage != "") print usage }'
