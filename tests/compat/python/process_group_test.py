#!/usr/bin/env python3
"""Unmodified init_process_group("gloo", "env://") with 4 ranks whose store is ddprund.

TORCHELASTIC_USE_AGENT_STORE=True makes every rank a plain TCPStore client of
MASTER_ADDR:MASTER_PORT (no rank hosts a store) under the prefix
/worker/attempt_<TORCHELASTIC_RESTART_COUNT>. Two attempts run against the same daemon;
the second only succeeds if the first attempt's keys (gloo addresses, barrier
counters) stay out of its way.
"""

import os
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

import compat_harness as h
from compat_harness import CheckFailure, expect_eq

WORLD_SIZE = 4
ATTEMPTS = (0, 1)
RANK_TIMEOUT_S = 90.0
FAILURE_GRACE_S = 5.0
PG_TIMEOUT = timedelta(seconds=60)
# Barrier counters of one attempt: the default group is group 0 (barrier key :1),
# then the two new_group calls below (:2 and :3). Every rank adds 1 to each.
BARRIER_KEYS = ("store_based_barrier_key:1", "store_based_barrier_key:2",
                "store_based_barrier_key:3")


def add_worker_args(parser):
    parser.add_argument("--worker", action="store_true",
                        help="internal: run as one rank (environment set by the parent)")


def all_reduce_sum(dist, torch, value, group=None):
    tensor = torch.tensor([float(value)])
    dist.all_reduce(tensor, group=group)
    return tensor.item()


def worker_main():
    """One rank: everything it learns about its peers goes through the store."""
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", init_method="env://", timeout=PG_TIMEOUT)
    expect_eq((dist.get_rank(), dist.get_world_size()), (rank, WORLD_SIZE), "rank, world size")
    expect_eq(all_reduce_sum(dist, torch, rank + 1), 10.0, "all_reduce of rank+1 over 4 ranks")

    whole = dist.new_group(ranks=list(range(WORLD_SIZE)))
    expect_eq(all_reduce_sum(dist, torch, 2 * rank, whole), 12.0, "all_reduce on new_group")
    # Every rank must call new_group, members or not.
    pair = dist.new_group(ranks=[0, 1])
    if rank < 2:
        expect_eq(all_reduce_sum(dist, torch, rank + 1, pair), 3.0, "all_reduce on [0, 1]")
    dist.barrier(group=whole)
    dist.barrier()
    dist.destroy_process_group()


def rank_env(port, rank, attempt):
    env = dict(os.environ)
    env.update({
        "MASTER_ADDR": h.HOST,
        "MASTER_PORT": str(port),
        "RANK": str(rank),
        "WORLD_SIZE": str(WORLD_SIZE),
        "TORCHELASTIC_USE_AGENT_STORE": "True",
        "TORCHELASTIC_RESTART_COUNT": str(attempt),
        "GLOO_SOCKET_IFNAME": "lo",
    })
    return env


def run_attempt(port, attempt):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--port", str(port)]
    # Files rather than pipes: nothing has to drain them while the ranks run.
    logs = [tempfile.TemporaryFile() for _ in range(WORLD_SIZE)]
    ranks = [h.spawn(cmd, env=rank_env(port, rank, attempt), stdout=logs[rank],
                     stderr=subprocess.STDOUT)
             for rank in range(WORLD_SIZE)]
    wait_for_ranks(ranks)
    codes = [proc.returncode for proc in ranks]
    if any(code != 0 for code in codes):
        raise CheckFailure(f"attempt {attempt}: rank exit codes {codes} (negative: killed by "
                           f"that signal, e.g. after the {RANK_TIMEOUT_S:.0f} s deadline or "
                           f"once another rank had failed)\n" + rank_outputs(attempt, logs))


def wait_for_ranks(ranks):
    """Waits for every rank; once one fails the rest get a short grace period.

    A failed rank leaves its peers blocked in gloo or the store until their own
    timeouts, which would only delay the report.
    """
    deadline = time.monotonic() + RANK_TIMEOUT_S
    while any(proc.poll() is None for proc in ranks) and time.monotonic() < deadline:
        if any(proc.returncode not in (None, 0) for proc in ranks):
            deadline = min(deadline, time.monotonic() + FAILURE_GRACE_S)
        time.sleep(0.05)
    for proc in ranks:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def rank_outputs(attempt, logs):
    parts = []
    for rank, log in enumerate(logs):
        log.seek(0)
        parts.append(f"---- attempt {attempt} rank {rank} ----\n"
                     + log.read().decode(errors="replace"))
    return "\n".join(parts)


def check_attempt_keys(dist, port):
    """Each attempt's barrier counters live under its own prefix and count 4 exactly."""
    store = dist.TCPStore(h.HOST, port, None, is_master=False,
                          timeout=timedelta(seconds=10), wait_for_workers=False)
    for attempt in ATTEMPTS:
        for key in BARRIER_KEYS:
            full_key = f"/worker/attempt_{attempt}/default_pg/{key}"
            expect_eq(store.add(full_key, 0), WORLD_SIZE, f"counter {full_key}")
    del store


def main(args):
    dist = h.require_torch()
    if not dist.is_gloo_available():
        h.skip("this torch build has no gloo backend")
    with h.store_endpoint(args) as port:
        for attempt in ATTEMPTS:
            started = time.monotonic()
            run_attempt(port, attempt)
            print(f"attempt {attempt}: {WORLD_SIZE} gloo ranks on ddprund (port {port}): "
                  f"all_reduce(rank+1) = 10 on every rank, new_group and barrier passed "
                  f"in {time.monotonic() - started:.1f} s", flush=True)
        check_attempt_keys(dist, port)


def worker_entry():
    try:
        worker_main()
    except CheckFailure as err:
        print(f"FAIL rank {os.environ.get('RANK')}: {err}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    parsed = h.parse_args(__doc__.splitlines()[0], add_worker_args)
    sys.exit(worker_entry() if parsed.worker else h.run_main(main, parsed))
