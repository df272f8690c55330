#!/usr/bin/python3
"""Writes launcher/app/launch_code.ld: the code a ddprun launch runs, laid out together.

A launch faults ddprun's code in from the page cache 64 KiB window by window
(the kernel's fault-around), and every process tears down what it mapped.
Spread over the whole text, the few hundred functions a launch runs touch
about 50 windows; together they fill about 12. The linker script this writes
names their input sections (every function has one: -ffunction-sections) in
an output section that GNU ld places before the rest of the text.

    bench/launch_code_order.py [BUILD_DIR]     (default: build)

It samples the functions that run (perf record, user space, at 50 kHz) over
RUNS runs (default 500) of each of: `ddprun --version`, a launch of 4 `true`
workers (--no-python), one of 4 Python workers, and a restart; a
function that runs for 1 us in every launch is sampled about 25 times. The
samples are attributed to input sections with the link map the build writes
beside the binary (launcher/ddprun.map). Before it writes, it says how much of
the sampled code the current script already covers, so a stale order shows;
--check says only that.

Needs perf (deploy/install-deps.sh installs it) and root or
kernel.perf_event_paranoid <= 2. Run it on a quiet machine after a change to
the launch path, rebuild, and commit the script with the change.
"""
import argparse
import bisect
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "launcher" / "app" / "launch_code.ld"
SECTION = ".text.launch"  # the output section; its name is checked by tests


def scenarios(ddprun, scratch):
    """The command lines sampled, each run `runs` times. Each one's code is
    laid out after the code of those before it that it shares: a start is a
    prefix of every launch, the launch of `true` workers a prefix of the others."""
    python_worker = scratch / "worker.py"
    python_worker.write_text("import sys\n")
    logs = ["--log-dir", str(scratch / "logs")]
    restart = 'test "$TORCHELASTIC_RESTART_COUNT" = 1'
    return [
        [ddprun, "--version"],
        [ddprun, "--standalone", "--nproc-per-node", "4", *logs, "--no-python", "true"],
        [ddprun, "--standalone", "--nproc-per-node", "4", *logs, str(python_worker)],
        [ddprun, "--standalone", "--nproc-per-node", "4", "--max-restarts", "1", *logs,
         "--no-python", "sh", "-c", restart],
    ]


def sampling_rate():
    """50 kHz, or the kernel's largest rate when it allows less."""
    try:
        allowed = int(Path("/proc/sys/kernel/perf_event_max_sample_rate").read_text())
    except (OSError, ValueError):
        allowed = 50000
    return min(50000, allowed)


def sample(ddprun, runs, scratch):
    """One Counter per scenario: its sampled function names (mangled) in
    ddprun's own text."""
    rate = str(sampling_rate())
    counted = []
    for index, argv in enumerate(scenarios(ddprun, scratch)):
        counts = Counter()
        counted.append(counts)
        data = scratch / f"perf{index}.data"
        loop = 'i=0; while [ "$i" -lt "$0" ]; do "$@" >/dev/null 2>&1; i=$((i + 1)); done'
        recorded = subprocess.run(["perf", "record", "-q", "-F", rate, "-e", "cpu-clock:u", "-o",
                                   str(data), "--", "sh", "-c", loop, str(runs), *argv])
        if recorded.returncode != 0:
            sys.exit(f"launch_code_order: perf record failed (exit {recorded.returncode}): "
                     "is perf installed, and perf_event_paranoid <= 2 or this user root?")
        script = subprocess.run(["perf", "script", "--no-demangle", "-i", str(data), "--dsos",
                                 ddprun, "-F", "ip,sym,dso"], capture_output=True, text=True,
                                check=True)
        for line in script.stdout.splitlines():
            fields = line.split()
            if len(fields) >= 3 and fields[-1] == f"({ddprun})":
                counts[fields[1]] += 1
        print(f"  {' '.join(Path(a).name if a == ddprun else a for a in argv[:6])} ...: "
              f"{runs} runs", file=sys.stderr)
    return counted


def symbol_addresses(binary):
    """Mangled function name -> its addresses (local names can repeat)."""
    nm = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True,
                        check=True)
    addresses = {}
    for line in nm.stdout.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1] in "tTwW":
            addresses.setdefault(fields[2], []).append(int(fields[0], 16))
    return addresses


def input_sections(map_file):
    """(start, size, section, object) of every input text section in the map."""
    sections = []
    lines = Path(map_file).read_text(errors="replace").splitlines()
    place = re.compile(r"^\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S+)")
    for index, line in enumerate(lines):
        # A long section name stands alone, its place on the next line.
        alone = re.match(r"^ (\.text\S*)\s*$", line)
        inline = re.match(r"^ (\.text\S*)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S+)", line)
        if alone and index + 1 < len(lines):
            placed = place.match(lines[index + 1])
            if placed:
                sections.append((int(placed.group(1), 16), int(placed.group(2), 16),
                                 alone.group(1), placed.group(3)))
        elif inline:
            sections.append((int(inline.group(2), 16), int(inline.group(3), 16),
                             inline.group(1), inline.group(4)))
    sections.sort()
    return sections


def pattern(section, obj):
    """The input-section pattern: by name alone, or by archive member for an
    object built without -ffunction-sections (its whole .text)."""
    if section != ".text":
        return f"*({section})"
    member = re.match(r".*/([^/(]+)\(([^)]+)\)$", obj)
    return f"*{member.group(1)}:{member.group(2)}(.text)" if member else None


def hot_sections(counted, addresses, map_file):
    """Input-section patterns: those of the first scenario, most sampled
    first, then those the second one adds, and so on."""
    sections = input_sections(map_file)
    starts = [s[0] for s in sections]
    rules = []
    placed = set()
    for counts in counted:
        weights = Counter()
        for name, samples in counts.items():
            for address in addresses.get(name, []):
                at = bisect.bisect_right(starts, address) - 1
                if at >= 0 and address < sections[at][0] + sections[at][1]:
                    rule = pattern(sections[at][2], sections[at][3])
                    if rule and rule not in placed:
                        weights[rule] += samples
        rules += [rule for rule, _ in weights.most_common()]
        placed.update(weights)
    return rules


def covered(counts, addresses, binary):
    """The fraction of the samples in functions the current SECTION holds."""
    readelf = subprocess.run(["readelf", "-SW", binary], capture_output=True, text=True,
                             check=True).stdout
    span = re.search(re.escape(SECTION) + r"\s+PROGBITS\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)",
                     readelf)
    if not span:
        return 0.0
    start, size = int(span.group(1), 16), int(span.group(2), 16)
    inside = sum(samples for name, samples in counts.items()
                 if any(start <= a < start + size for a in addresses.get(name, [])))
    return inside / max(1, sum(counts.values()))


def write_script(rules):
    body = "\n".join(f"    {rule}" for rule in rules)
    SCRIPT.write_text(f"""\
/* The code a ddprun launch runs, laid out together before the rest of the
   text (GNU ld keeps its default script; this one is INSERTed). Written by
   bench/launch_code_order.py from perf samples of launches; a name that no
   longer exists matches nothing. Regenerate it after changing the launch
   path (docs/benchmarks.md). */
SECTIONS
{{
  {SECTION} :
  {{
{body}
  }}
}}
INSERT BEFORE .text;
""")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir", nargs="?", default="build")
    parser.add_argument("--runs", type=int, default=int(os.environ.get("RUNS", "500")))
    parser.add_argument("--check", action="store_true",
                        help="only say how much of the sampled code the script covers")
    args = parser.parse_args()
    ddprun = str(Path(args.build_dir, "launcher", "ddprun").resolve())
    map_file = ddprun + ".map"
    for needed in (ddprun, map_file):
        if not Path(needed).exists():
            sys.exit(f"launch_code_order: {needed} is missing: build ddprun first")
    with tempfile.TemporaryDirectory(prefix="launch_code_order.") as scratch:
        counted = sample(ddprun, args.runs, Path(scratch))
    counts = sum(counted, Counter())
    if not counts:
        sys.exit("launch_code_order: perf sampled nothing in ddprun (perf_event_paranoid?)")
    addresses = symbol_addresses(ddprun)
    held = (f"launch_code_order: {len(counts)} functions sampled; the current {SECTION} held "
            f"{covered(counts, addresses, ddprun):.0%} of the samples")
    if args.check:
        print(held, file=sys.stderr)
        return
    rules = hot_sections(counted, addresses, map_file)
    print(f"{held}; {len(rules)} sections written to {SCRIPT.relative_to(REPO)}",
          file=sys.stderr)
    write_script(rules)


if __name__ == "__main__":
    main()
