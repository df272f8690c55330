#!/usr/bin/env python3
"""A 1.13 wait timeout followed by another client's SET (docs/tcpstore-protocol.md §8.2).

The 1.13 client gives up on a WAIT locally and never tells the server. PyTorch's
server keeps the registration and later sends a stray STOP_WAITING byte when another
client creates the key; every later reply on that connection is read one byte off
(the capture shows add(cnt, 0) returning -512 instead of -2). ddprund drops the stale
registration as soon as the timed-out client sends its next request.

The server can only do that once the next request has arrived: a SET that lands
between the timeout and the client's next request has already sent its STOP_WAITING,
and no server can take that byte back. So the order here is: timeout, next op,
other client's SET, and then the ops whose replies a stray byte would corrupt.
"""

import sys
from datetime import timedelta

import compat_harness as h
from compat_harness import expect_eq, expect_raises

STORE_TIMEOUT = timedelta(seconds=20)
SHORT_WAIT = timedelta(milliseconds=500)


def connect(dist, port):
    return dist.TCPStore(h.HOST, port, 2, is_master=False, timeout=STORE_TIMEOUT)


def main(args):
    dist = h.require_torch()
    with h.store_endpoint(args) as port:
        waiter = connect(dist, port)
        setter = connect(dist, port)
        expect_eq(waiter.add("cnt", -2), -2, "initial add")

        expect_raises("Socket Timeout", "wait on a key nobody has set", waiter.wait,
                      ["missing"], SHORT_WAIT)
        expect_eq(waiter.add("cnt", 0), -2, "the timed-out client's next add")

        setter.set("missing", "now-set")
        # A round trip on the setter: the store has handled the SET (and sent any
        # STOP_WAITING it still owed) before the waiter's next request goes out.
        expect_eq(setter.get("missing"), b"now-set", "setter reads its own SET")

        expect_eq(waiter.add("cnt", 0), -2, "add after another client set the abandoned key")
        expect_eq(waiter.get("missing"), b"now-set", "get after the abandoned wait")
        expect_eq(waiter.add("cnt", 5), 3, "add with a non-zero delta afterwards")
        expect_eq(setter.add("cnt", 0), 3, "the other client sees the same counter")

        # A second abandoned wait on the same connection behaves the same way.
        expect_raises("Socket Timeout", "second wait timeout", waiter.wait,
                      ["missing-2"], SHORT_WAIT)
        expect_eq(waiter.add("cnt", 0), 3, "add after the second wait timeout")
        setter.set("missing-2", "x")
        expect_eq(setter.get("missing-2"), b"x", "setter reads its second SET")
        expect_eq(waiter.add("cnt", 0), 3, "add after the second abandoned key was set")
        del waiter, setter


if __name__ == "__main__":
    parsed = h.parse_args(__doc__.splitlines()[0])
    sys.exit(h.run_main(main, parsed))
