"""A Python worker whose descendants outlive it unless its launcher kills them.

Run under ddprun by the process clean-up tests with python3-torch. Starts:

  subprocess   `sleep 600` through subprocess.Popen (in the worker's process group)
  mp_process   a multiprocessing.Process that sleeps (its process group too)
  dataloader   the workers of a DataLoader (num_workers=2), kept alive by an iterator
  setsid       `sleep 600` with start_new_session=True (a session of its own)
  daemon       fork, setsid, fork: its parent exits, so it is nobody's child

and writes "<kind> <pid>" lines to OUT/leak.<attempt>.<local rank> (whole: written,
then renamed). Then, on attempt --crash-attempt, it exits 1 at once (os._exit: no
clean-up of its own); otherwise it sleeps until it is killed.

usage: leaky_worker.py --out DIR [--crash-attempt N]
"""

import argparse
import multiprocessing
import os
import subprocess
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Numbers(Dataset):
    def __len__(self):
        return 1_000_000

    def __getitem__(self, index):
        return torch.tensor([index])


def sleep_forever():
    while True:
        time.sleep(600)


def daemon():
    """The daemon's pid, read from a pipe: fork, setsid, fork, and the middle exits."""
    read_end, write_end = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.close(read_end)
        os.setsid()
        grandchild = os.fork()
        if grandchild == 0:
            os.close(write_end)
            sleep_forever()
        os.write(write_end, str(grandchild).encode())
        os._exit(0)
    os.close(write_end)
    pid = int(os.read(read_end, 32).decode())
    os.close(read_end)
    os.waitpid(middle, 0)
    return pid


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--crash-attempt", type=int, default=-1)
    args = parser.parse_args()
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    local_rank = os.environ.get("LOCAL_RANK", "x")

    pids = []
    sleeper = subprocess.Popen(["sleep", "600"])
    pids.append(("subprocess", sleeper.pid))
    process = multiprocessing.get_context("fork").Process(target=sleep_forever)
    process.start()
    pids.append(("mp_process", process.pid))
    loader = DataLoader(Numbers(), batch_size=1, num_workers=2, persistent_workers=True)
    batches = iter(loader)
    next(batches)  # the workers are up
    pids.extend(("dataloader", worker.pid) for worker in batches._workers)
    isolated = subprocess.Popen(["sleep", "600"], start_new_session=True)
    pids.append(("setsid", isolated.pid))
    pids.append(("daemon", daemon()))

    name = os.path.join(args.out, "leak.%d.%s" % (attempt, local_rank))
    with open(name + ".tmp", "w") as out:
        out.writelines("%s %d\n" % pair for pair in pids)
    os.rename(name + ".tmp", name)
    sys.stdout.flush()
    if attempt == args.crash_attempt:
        os._exit(1)
    sleep_forever()


if __name__ == "__main__":
    main()
