#!/usr/bin/env python3
"""Writes fuzz seeds for fuzz_request_decoder from the TCPStore captures.

Usage: make_seed_corpus.py FIXTURES_DIR OUT_DIR

Each seed is a 4-byte control header (dialect/limits flags, tiny request
limit, 16-bit split point) followed by one connection's reassembled client-to-server stream, as
the fuzz target expects. Standard library only.
"""
import json
import pathlib
import sys

# data[0]: bit 0 = legacy 2.1 instead of 1.13, bit 1 = tiny limits.
FLAG_VARIANTS = (0, 1, 2, 3)
# data[1]: with tiny limits, max_request_bytes = 16 + this byte.
TINY_REQUEST_BYTE = 32


def client_streams(path):
    streams = {}
    with open(path, encoding="utf-8") as log:
        for line in log:
            record = json.loads(line)
            if record["dir"] == "C>S":
                streams.setdefault(record["conn"], bytearray()).extend(
                    bytes.fromhex(record["hex"]))
    return {conn: bytes(data) for conn, data in streams.items() if data}


def main(fixtures_dir, out_dir):
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    count = 0
    for capture in sorted(pathlib.Path(fixtures_dir).glob("*.jsonl")):
        for conn, stream in client_streams(capture).items():
            split = len(stream) // 2
            for flags in FLAG_VARIANTS:
                header = bytes([flags, TINY_REQUEST_BYTE, split >> 8 & 0xFF, split & 0xFF])
                name = f"{capture.stem}-conn{conn}-flags{flags}"
                (out / name).write_bytes(header + stream)
                count += 1
    print(f"wrote {count} seeds to {out}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
