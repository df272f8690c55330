#!/usr/bin/env bash
# Checks the relative links of every tracked Markdown file.
#
# Usage: deploy/check-links.sh
#
# For each `*.md` file git tracks, every inline link `[text](target)` and every
# reference definition `[label]: target` whose target is relative (no scheme
# such as `https:` or `mailto:`, not starting with `/`) must resolve:
#   - `path` and `path#anchor`: the file or directory exists, relative to the
#     linking file's directory;
#   - `#anchor` and `path#anchor` into a Markdown file: a heading of that file
#     produces the anchor, by GitHub's rule (lower case; punctuation other than
#     `-` and `_` dropped; spaces become `-`; a repeated heading gets `-1`,
#     `-2`, ...), or the file has an explicit `<a name=...>`/`id=...`.
# Links inside fenced code blocks and inline code spans are not links and are
# skipped. Targets with a `?query` are checked without it.
#
# Exit status: 0 when every link resolves; 1 when one does not, after listing
# each as `file:line: link`; 2 outside a git work tree.
set -euo pipefail
cd "$(dirname "$0")/.."
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || {
  echo "check-links: not in a git work tree" >&2
  exit 2
}

python3 - <<'PY'
import os, re, subprocess, sys, unicodedata
from urllib.parse import unquote

listing = subprocess.run(["git", "ls-files", "-z", "--", "*.md"], check=True,
                         capture_output=True).stdout.decode()
files = [f for f in listing.split("\0") if f]

FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
EXPLICIT = re.compile(r"""<a\s+[^>]*(?:name|id)\s*=\s*["']([^"']+)["']""", re.I)

def lines_outside_code(text):
    """Yields (line number, line) outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        yield number, line

def slug(heading):
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)                          # inline HTML
    text = text.replace("`", "")
    text = re.sub(r"(\*\*|__|\*|(?<!\w)_|_(?!\w))", "", text)    # emphasis marks
    text = text.strip().lower()
    out = []
    for ch in text:
        if ch == " ":
            out.append("-")
        elif ch in "-_" or unicodedata.category(ch)[0] in "LN":
            out.append(ch)
    return "".join(out)

anchor_cache = {}
def anchors(path):
    if path not in anchor_cache:
        found, seen = set(), {}
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for _, line in lines_outside_code(text):
            m = HEADING.match(line)
            if m:
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
            for a in EXPLICIT.findall(line):
                found.add(a)
        anchor_cache[path] = found
    return anchor_cache[path]

broken = []
for md in files:
    if not os.path.isfile(md):
        continue  # deleted in the work tree, not yet in the index
    with open(md, encoding="utf-8") as f:
        text = f.read()
    for number, line in lines_outside_code(text):
        bare = CODE_SPAN.sub("", line)
        targets = [m.group(1) for m in INLINE.finditer(bare)]
        m = REFDEF.match(bare)
        if m:
            targets.append(m.group(1))
        for target in targets:
            if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target) or target.startswith("/"):
                continue  # a URL (https:, mailto:, ...) or an absolute path
            path, _, anchor = target.partition("#")
            path = unquote(path.split("?", 1)[0])
            resolved = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
            ok = os.path.exists(resolved)
            if ok and anchor and resolved.endswith(".md") and os.path.isfile(resolved):
                ok = unquote(anchor).lower() in anchors(resolved)
            if not ok:
                broken.append(f"{md}:{number}: {target}")

for b in broken:
    print(b)
if broken:
    print(f"check-links: {len(broken)} broken link(s)", file=sys.stderr)
    sys.exit(1)
PY
