"""A stand-in for torch's Flight Recorder analyser (torch 2.5 and later).

It takes the analyser's arguments (--prefix PREFIX DIR), prints the verdict
the real one prints for a rank missing from a collective, and lists the
dumps it found, so a test can check what ddprun gathered and ran.
"""
import argparse
import os

parser = argparse.ArgumentParser()
parser.add_argument("trace_dir")
parser.add_argument("--prefix", default="")
args = parser.parse_args()
dumps = sorted(name for name in os.listdir(args.trace_dir) if name.startswith(args.prefix))
print("Not all ranks joining collective 5 at entry 4")
print("missing ranks: {1}")
print("dumps read: " + " ".join(dumps))
