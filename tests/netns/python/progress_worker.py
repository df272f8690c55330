"""A python3-torch worker for the hang tests: Gloo DDP-style steps (an
all-reduce each), progress reported after every step as docs/launcher.md
shows, a snapshot of the step every few steps, resumed from on a restart.

    progress_worker.py SNAPSHOT TOTAL_STEPS [--spin-rank R --spin-step S]

With --spin-rank, rank R of attempt 0 stops reporting at step S and keeps a
CPU busy, as a rank whose collective hangs under NCCL does; the others then
wait in their next all-reduce."""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist

progress_file = os.environ.get("DDPRUN_PROGRESS_EVENTS")


def report_progress(step):
    if progress_file:
        with open(progress_file, "a") as f:
            f.write(json.dumps({"name": "progress", "step": step,
                                "ts_monotonic_ns": time.monotonic_ns(),
                                "wall": time.time()}) + "\n")


def spin_without_progress():
    while True:
        pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("snapshot")
    parser.add_argument("total_steps", type=int)
    parser.add_argument("--spin-rank", type=int, default=-1)
    parser.add_argument("--spin-step", type=int, default=-1)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    start = 0
    if os.path.exists(args.snapshot):
        with open(args.snapshot) as f:
            start = int(f.read()) + 1
    print(f"rank {rank} attempt {attempt}: starting at step {start}", flush=True)
    for step in range(start, args.total_steps):
        if attempt == 0 and rank == args.spin_rank and step == args.spin_step:
            spin_without_progress()
        total = torch.tensor([float(step)])
        dist.all_reduce(total)
        report_progress(step)
        if rank == 0 and step % 5 == 0:
            with open(args.snapshot + ".tmp", "w") as f:
                f.write(str(step))
            os.replace(args.snapshot + ".tmp", args.snapshot)
        time.sleep(0.05)
    print(f"rank {rank} attempt {attempt}: done", flush=True)
    dist.destroy_process_group()


main()
