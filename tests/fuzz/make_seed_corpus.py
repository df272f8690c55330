#!/usr/bin/env python3
"""Writes fuzz seeds for fuzz_request_decoder from the TCPStore captures.

Usage: make_seed_corpus.py FIXTURES_DIR OUT_DIR

Each seed is a 4-byte control header (dialect/limits flags, tiny request
limit, 16-bit split point) followed by a client-to-server stream, as the fuzz
target expects: each connection of the captures, reassembled, and streams of
large multi-key requests (CHECK, WAIT, MULTI_GET, MULTI_SET) split inside
their count, a length and a key. Standard library only.
"""
import json
import pathlib
import struct
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


def header(flags, split):
    return bytes([flags, TINY_REQUEST_BYTE, split >> 8 & 0xFF, split & 0xFF])


def u64(value):
    return struct.pack("<Q", value)


def sized(data):
    return u64(len(data)) + data


# Wire bytes of the multi-key commands: 2.2+ (after VALIDATE), 2.1 and 1.13.
VALIDATE = bytes.fromhex("00cef7853c")
MODERN = {"check": 5, "wait": 6, "multi_get": 10, "multi_set": 11}
LEGACY21 = {"check": 4, "wait": 5, "multi_get": 9, "multi_set": 10}
LEGACY113 = {"check": 4, "wait": 5}


def multi_key_request(byte, command, keys):
    if command == "multi_set":
        body = b"".join(sized(k) + sized(b"v" * (i % 5)) for i, k in enumerate(keys))
    else:
        body = b"".join(sized(k) for k in keys)
    return bytes([byte]) + u64(len(keys)) + body


def multi_key_seeds():
    """(name, flags, stream, split) of multi-key requests, two back to back."""
    dialects = (("modern", 0, VALIDATE, MODERN), ("legacy21", 1, b"", LEGACY21),
                ("legacy113", 0, b"", LEGACY113))
    for dialect, flags, preamble, table in dialects:
        for command, byte in table.items():
            for n in (1, 3, 64, 300):
                keys = [f"/k/{i}".encode() * (1 + i % 3) for i in range(n)]
                first = multi_key_request(byte, command, keys)
                stream = preamble + first + multi_key_request(byte, command, keys[:2])
                start = len(preamble)
                # Inside the count, a length, a key; the last byte of the first request.
                for where, split in (("count", start + 4), ("length", start + 12),
                                     ("key", start + 18), ("end", start + len(first) - 1)):
                    yield f"{dialect}-{command}-{n}keys-split-{where}", flags, stream, split
                    # Tiny limits: at most 3 keys, so the larger lists are refused.
                    yield (f"{dialect}-{command}-{n}keys-split-{where}-tiny", flags | 2, stream,
                           split)


def main(fixtures_dir, out_dir):
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    count = 0
    for name, flags, stream, split in multi_key_seeds():
        (out / name).write_bytes(header(flags, split) + stream)
        count += 1
    for capture in sorted(pathlib.Path(fixtures_dir).glob("*.jsonl")):
        for conn, stream in client_streams(capture).items():
            split = len(stream) // 2
            for flags in FLAG_VARIANTS:
                name = f"{capture.stem}-conn{conn}-flags{flags}"
                (out / name).write_bytes(header(flags, split) + stream)
                count += 1
    print(f"wrote {count} seeds to {out}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
