#!/usr/bin/env python3
"""torch's file timer, served by ddprun, with unmodified python3-torch workers.

Under TORCHELASTIC_ENABLE_FILE_TIMER=1, workers arm deadlines with torch's
own FileTimerClient at os.environ["TORCHELASTIC_TIMER_FILE"] and
torch.distributed.elastic.timer.expires(after=...). A worker stuck past its
deadline (time.sleep(30) under expires(after=1)) is SIGKILLed once every
local worker's stacks are taken, and reported with its scope; with --max-restarts=1 the group restarts
and succeeds. Workers that release their timers in time are left alone, and
the pipe ddprun created is gone when it exits.
(docs/torchrun-contract.md §7.6)
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

import compat_harness as h
from compat_harness import expect_eq, expect_true

WORKER = """
import os, sys, time
from torch.distributed.elastic import timer
timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
rank = int(os.environ["RANK"])
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
print(f"rank={rank} pipe={os.environ['TORCHELASTIC_TIMER_FILE']}", flush=True)
stuck_attempt = sys.argv[1] == "stuck" and attempt == os.environ.get("STUCK_ON_ATTEMPT", "0")
if stuck_attempt and rank == 1:
    print("entering stuck_step", flush=True)
    with timer.expires(after=1, scope="stuck_step"):
        time.sleep(30)
    print("woke up: the timer never fired", flush=True)
    sys.exit(3)
for step in range(3):
    with timer.expires(after=1, scope="quick_step"):
        time.sleep(0.1)
# Past every deadline it released. In the attempt where rank 1 is stuck the
# others wait for the group to be stopped: on a loaded machine rank 1 may
# reach its scope well after them, and a rank could finish first.
time.sleep(30 if stuck_attempt else 1.5)
print(f"rank={rank} attempt={attempt} released in time", flush=True)
"""


def run_ddprun(ddprun, script, mode, extra_flags=(), stuck_on_attempt="0"):
    """Runs ddprun to its end; returns (exit status, stdout, stderr, seconds
    from the stuck worker entering its scope to ddprun's exit, or None)."""
    # TMPDIR, where ddprun puts its logs (no --log-dir) and the timer's pipe,
    # is the test's directory (the script's): removed with it.
    env = dict(os.environ, PYTHON_EXEC=sys.executable, TORCHELASTIC_ENABLE_FILE_TIMER="1",
               STUCK_ON_ATTEMPT=stuck_on_attempt, TMPDIR=os.path.dirname(script))
    env.pop("TORCHELASTIC_TIMER_FILE", None)
    cmd = [ddprun, "--standalone", "--nproc-per-node=2", *extra_flags, script, mode]
    with tempfile.TemporaryFile("w+") as stderr:
        proc = h.spawn(cmd, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
        entered = None
        out = []
        for line in proc.stdout:  # ends when ddprun and its workers are gone
            out.append(line)
            if "entering stuck_step" in line and entered is None:
                entered = time.monotonic()
        code = proc.wait(timeout=60)
        ended = time.monotonic()
        stderr.seek(0)
        err = stderr.read()
    return code, "".join(out), err, (ended - entered) if entered is not None else None


def pipes(out):
    return {line.split("pipe=", 1)[1].strip() for line in out.splitlines() if "pipe=" in line}


def main(args):
    h.require_torch()
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "timed_worker.py")
        with open(script, "w") as f:
            f.write(WORKER)

        code, out, err, after = run_ddprun(args.ddprun, script, "stuck")
        expect_eq(code, 128 + 9, f"exit status: rank 1 SIGKILLed (stderr: {err})")
        # Before the kill every local worker's stacks are taken: gdb reads
        # LibTorch's symbols for each, seconds on a loaded machine (bounded
        # at 15 s a tool). Well before the 30 s sleep ends either way.
        expect_true(after is not None and after < 25.0,
                    f"killed once the stacks were in, not at the end of the 30 s sleep "
                    f"({after} s; stdout: {out})")
        expect_true("woke up" not in out, "the stuck worker never woke up")
        expect_true("rank      : 1 (local_rank: 1)" in err, f"the report names rank 1: {err}")
        expect_true("reason    : timed out in scope 'stuck_step' (file timer; SIGKILL sent) "
                    "(stack below); killed by SIGKILL (signal 9)" in err,
                    f"the report names the scope: {err}")
        expect_true("  peers     : where the other ranks were (this node's, then the other nodes')" in err,
                    f"every local rank's stacks were taken before the kill: {err}")
        served = pipes(out)
        expect_eq(len(served), 1, f"both ranks got the one pipe ddprun serves: {served}")
        pipe = served.pop()
        expect_true(pipe.startswith(os.path.join(tmp, "watchdog_timer_")),
                    f"torch's name for it, in the temporary directory: {pipe}")
        expect_true(not os.path.exists(pipe), f"{pipe} was removed when ddprun ended")
        print(f"rank 1 stuck in 'stuck_step' was killed {after:.1f} s after entering it",
              flush=True)

        code, out, err, _ = run_ddprun(args.ddprun, script, "stuck", ["--max-restarts=1"])
        expect_eq(code, 0, f"exit status after a restart (stderr: {err})")
        expect_eq(sorted(line for line in out.splitlines() if "released in time" in line),
                  ["rank=0 attempt=1 released in time", "rank=1 attempt=1 released in time"],
                  "attempt 1 after rank 1 timed out on attempt 0")
        print("with --max-restarts=1 the group restarted and attempt 1 succeeded", flush=True)

        code, out, err, _ = run_ddprun(args.ddprun, script, "release")
        expect_eq(code, 0, f"workers that release in time succeed (stderr: {err})")
        expect_eq(sorted(line for line in out.splitlines() if "released in time" in line),
                  ["rank=0 attempt=0 released in time", "rank=1 attempt=0 released in time"],
                  "both ranks outlived their released deadlines")
        print("workers that released their timers in time were left alone", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ddprun", required=True)
    parser.add_argument("--timeout", type=float, default=200.0)
    sys.exit(h.run_main(main, parser.parse_args()))
