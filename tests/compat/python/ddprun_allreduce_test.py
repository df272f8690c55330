#!/usr/bin/env python3
"""Unmodified PyTorch DDP-style workers under ddprun --standalone.

Four python3-torch ranks run init_process_group("gloo") from the environment
ddprun gives them and all-reduce rank+1 (sum 10). Then rank 2 crashes on
attempt 0: with --max-restarts=1 the group is restarted and attempt 1
succeeds; without restarts ddprun exits with rank 2's code and reports it.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import compat_harness as h
from compat_harness import CheckFailure, expect_eq, expect_true

WORKER = """
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
if rank == 2 and os.environ.get("CRASH_ON_ATTEMPT") == os.environ["TORCHELASTIC_RESTART_COUNT"]:
    os._exit(7)
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print(f"rank={rank} attempt={os.environ['TORCHELASTIC_RESTART_COUNT']} "
      f"world={dist.get_world_size()} sum={t.item()}", flush=True)
dist.destroy_process_group()
"""


def ddprun_env(script):
    """ddprun's environment; its logs (no --log-dir: under $TMPDIR) go in
    the test's directory, the script's, and are removed with it."""
    env = dict(os.environ, PYTHON_EXEC=sys.executable, GLOO_SOCKET_IFNAME="lo",
               TMPDIR=os.path.dirname(script))
    env.pop("CRASH_ON_ATTEMPT", None)
    return env


def run_ddprun(ddprun, script, extra_flags, crash_on_attempt=None):
    env = ddprun_env(script)
    if crash_on_attempt is not None:
        env["CRASH_ON_ATTEMPT"] = str(crash_on_attempt)
    cmd = [ddprun, "--standalone", "--nproc-per-node=4", *extra_flags, script]
    proc = h.spawn(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=90)
    return proc.returncode, out, err


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_static_two_nodes(ddprun, script):
    """Two ddprun agents (--nnodes 2) on loopback, 2 ranks each: one job of 4."""
    env = ddprun_env(script)
    port = str(free_port())
    agents = []
    for node in (1, 0):  # node 1 first: it must wait for node 0's store
        cmd = [ddprun, "--nnodes=2", f"--node-rank={node}", "--master-addr=127.0.0.1",
               f"--master-port={port}", "--nproc-per-node=2", script]
        agents.append(h.spawn(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True))
    outputs = [agent.communicate(timeout=90) for agent in agents]
    return [agent.returncode for agent in agents], "".join(out for out, _ in outputs), outputs


def results(out):
    # Workers share ddprun's stdout, and ddprun does not yet relay their
    # output in whole lines (python -u writes a line and its newline apart),
    # so records are matched anywhere rather than line by line.
    return sorted(re.findall(r"rank=\d+ attempt=\d+ world=\d+ sum=[0-9.]+", out))


def main(args):
    h.require_torch()
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "allreduce.py")
        with open(script, "w") as f:
            f.write(WORKER)

        code, out, err = run_ddprun(args.ddprun, script, [])
        expect_eq(code, 0, f"ddprun exit status (stderr: {err})")
        expect_eq(results(out), [f"rank={r} attempt=0 world=4 sum=10.0" for r in range(4)],
                  "each rank's all_reduce")
        print("4 ranks under ddprun --standalone: all_reduce = 10 on every rank", flush=True)

        code, out, err = run_ddprun(args.ddprun, script, ["--max-restarts=1"], crash_on_attempt=0)
        expect_eq(code, 0, f"exit status after a restart (stderr: {err})")
        expect_eq(results(out), [f"rank={r} attempt=1 world=4 sum=10.0" for r in range(4)],
                  "attempt 1 after rank 2 crashed on attempt 0")
        print("rank 2 crashed on attempt 0; attempt 1 succeeded", flush=True)

        codes, out, outputs = run_static_two_nodes(args.ddprun, script)
        expect_eq(codes, [0, 0], f"both static agents' exit status ({outputs})")
        expect_eq(results(out), [f"rank={r} attempt=0 world=4 sum=10.0" for r in range(4)],
                  "4 ranks over 2 static nodes")
        print("2 static nodes x 2 ranks on loopback: all_reduce = 10 on every rank", flush=True)

        code, out, err = run_ddprun(args.ddprun, script, [], crash_on_attempt=0)
        expect_eq(code, 7, "exit status is the root cause's exit code")
        expect_true("rank      : 2 (local_rank: 2)" in err, f"the report names rank 2: {err}")
        print("without restarts ddprun exits 7 and names rank 2", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ddprun", required=True)
    parser.add_argument("--timeout", type=float, default=200.0)
    sys.exit(h.run_main(main, parser.parse_args()))
