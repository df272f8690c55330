#!/usr/bin/env python3
"""python3-torch's own TCPStore client doing every Python-exposed operation against ddprund.

With torch 1.13 this is dialect A: no handshake, ADD "init/" on connect, a second idle
callback connection, and client-side wait timeouts that leave the server's wait
registration behind (docs/tcpstore-protocol.md §8.2).
"""

import sys
import time
from datetime import timedelta

import compat_harness as h
from compat_harness import expect_eq, expect_raises, expect_true

STORE_TIMEOUT = timedelta(seconds=20)
SHORT_WAIT = timedelta(milliseconds=500)
# The 1.13 client reports a receive timeout with this text (SO_RCVTIMEO expiring).
TIMEOUT_TEXT = "Socket Timeout"


def check_set_get(store):
    store.set("k1", "v1")
    expect_eq(store.get("k1"), b"v1", "get after set")
    store.set("k1", "v2")
    expect_eq(store.get("k1"), b"v2", "get after overwriting set")
    binary = b"\x00\xff\x00 binary\n"
    store.set("bin", binary)
    expect_eq(store.get("bin"), binary, "binary value with NUL bytes")
    big = bytes(range(256)) * 4096  # 1 MiB: several TCP segments each way
    store.set("big", big)
    expect_eq(store.get("big"), big, "1 MiB value")


def check_add(store):
    expect_eq(store.add("cnt", 5), 5, "add to an absent key counts from 0")
    expect_eq(store.add("cnt", 0), 5, "add 0 reads the counter")
    expect_eq(store.add("cnt", -7), -2, "negative add")
    expect_eq(store.get("cnt"), b"-2", "counter stored as ASCII decimal")
    store.set("num", "40")
    expect_eq(store.add("num", 2), 42, "add to a value written by set")


def check_compare_set(store):
    # The four cases of docs/tcpstore-protocol.md §7.2, in the order the 1.13 capture used.
    expect_eq(store.compare_set("cs", "", "new"), b"new", "CAS absent key, empty expected")
    keys_before = store.num_keys()
    expect_eq(store.compare_set("cs2", "x", "y"), b"x",
              "CAS absent key, non-empty expected replies expected")
    expect_eq(store.num_keys(), keys_before, "CAS absent key, non-empty expected stores nothing")
    expect_eq(store.compare_set("cs", "new", "newer"), b"newer", "CAS match replaces")
    expect_eq(store.compare_set("cs", "wrong", "z"), b"newer", "CAS mismatch keeps current value")
    expect_eq(store.get("cs"), b"newer", "value after CAS mismatch")


def check_num_keys_and_delete(store):
    before = store.num_keys()
    store.set("doomed", "x")
    expect_eq(store.num_keys(), before + 1, "num_keys after adding a key")
    expect_eq(store.delete_key("doomed"), True, "delete of an existing key")
    expect_eq(store.delete_key("doomed"), False, "delete of a deleted key")
    expect_eq(store.num_keys(), before, "num_keys after delete")


def check_wait_ok(store):
    store.wait(["cnt", "cs"])
    store.wait(["k1"], SHORT_WAIT)


def timed_out_after(what, fn, *args):
    started = time.monotonic()
    expect_raises(TIMEOUT_TEXT, what, fn, *args)
    return time.monotonic() - started


def check_wait_timeout_then_ops(store):
    elapsed = timed_out_after("wait on a missing key", store.wait, ["missing"], SHORT_WAIT)
    expect_true(elapsed >= 0.4, f"wait timed out after {elapsed:.2f} s, before its 0.5 s timeout")
    expect_eq(store.add("cnt", 0), -2, "first op after a wait timeout")
    # This client's own SET of the key it gave up on: a server that kept the stale
    # registration now sends a stray STOP_WAITING byte, and the replies below shift by one.
    store.set("missing", "now-set")
    expect_eq(store.add("cnt", 1), -1, "add after setting the key of a timed-out wait")
    expect_eq(store.get("missing"), b"now-set", "get of the formerly missing key")


def check_set_timeout(store):
    store.set_timeout(timedelta(seconds=1))
    elapsed = timed_out_after("get of a missing key with a 1 s timeout", store.get, "never-set")
    expect_true(0.9 <= elapsed < 10, f"get with a 1 s store timeout gave up after {elapsed:.2f} s")
    expect_eq(store.add("cnt", 0), -1, "first op after a get timeout")
    store.set_timeout(STORE_TIMEOUT)
    store.set("never-set", "set-at-last")
    expect_eq(store.get("never-set"), b"set-at-last", "get after set_timeout restored")
    expect_eq(store.add("cnt", 0), -1, "counter after the late set")


def main(args):
    dist = h.require_torch()
    with h.store_endpoint(args) as port:
        store = dist.TCPStore(h.HOST, port, 1, is_master=False, timeout=STORE_TIMEOUT)
        # The constructor's ADD "init/" +1 (world_size is set) is the only key so far.
        expect_eq(store.num_keys(), 1, "num_keys right after connecting (the init/ counter)")
        check_set_get(store)
        check_add(store)
        check_compare_set(store)
        check_num_keys_and_delete(store)
        check_wait_ok(store)
        check_wait_timeout_then_ops(store)
        check_set_timeout(store)
        # init/, k1, bin, big, cnt, num, cs, missing, never-set
        expect_eq(store.num_keys(), 9, "final num_keys")
        del store


if __name__ == "__main__":
    parsed = h.parse_args(__doc__.splitlines()[0])
    sys.exit(h.run_main(main, parsed))
