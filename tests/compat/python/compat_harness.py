"""Shared plumbing for the Python compat tests: real PyTorch clients against ddprund.

Every script spawns its own ddprund (--port 0 --port-file in a temporary directory),
talks to it with python3-torch's own TCPStore client and stops it with SIGTERM,
expecting exit code 0. A watchdog process bounds the whole run so a protocol bug
shows up as a failure, never as a hung ctest.
"""

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback

# ctest maps this exit code to "skipped" through the SKIP_RETURN_CODE property.
SKIP_EXIT_CODE = 77
HOST = "127.0.0.1"


class CheckFailure(AssertionError):
    """A mismatch between what PyTorch's client saw and what the protocol requires."""


def expect_eq(actual, expected, what):
    if actual != expected:
        raise CheckFailure(f"{what}: expected {expected!r}, got {actual!r}")


def expect_true(condition, what):
    if not condition:
        raise CheckFailure(what)


def expect_raises(substring, what, fn, *args):
    """Runs fn(*args) and requires a RuntimeError whose message holds substring."""
    try:
        fn(*args)
    except RuntimeError as err:
        if substring not in str(err):
            raise CheckFailure(f"{what}: expected an error containing {substring!r}, got {err!r}")
        return err
    raise CheckFailure(f"{what}: expected RuntimeError({substring!r}), but the call returned")


def parse_args(description, extra=None):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--daemon", help="path to the ddprund executable to spawn")
    parser.add_argument("--port", type=int, default=0,
                        help="use a store already listening on this port instead of spawning "
                             "--daemon (for comparing against a reference server)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="hard limit for the whole script, in seconds")
    if extra:
        extra(parser)
    args = parser.parse_args()
    if not args.port and not args.daemon:
        parser.error("either --daemon or --port is required")
    return args


def require_torch():
    """Returns torch.distributed, or exits with the skip code when it is unusable."""
    try:
        import torch  # noqa: F401
        import torch.distributed as dist
    except ImportError as err:
        skip(f"this interpreter ({sys.executable}) cannot import torch: {err}")
    if not dist.is_available():
        skip("torch.distributed is not available in this torch build")
    return dist


def skip(reason):
    print(f"SKIP: {reason}", flush=True)
    sys.exit(SKIP_EXIT_CODE)


def _die_with_parent():
    # Runs in the child between fork and exec: if this test process is killed
    # (ctest timeout, watchdog), the kernel kills the child too instead of
    # leaving a daemon or a rank behind.
    PR_SET_PDEATHSIG = 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn(cmd, **kwargs):
    """Popen whose child dies with this process, watchdog kill included."""
    return subprocess.Popen(cmd, preexec_fn=_die_with_parent, **kwargs)


# Runs in its own interpreter: sleeps until the deadline unless its stdin (a
# pipe whose write end only the test process holds) reaches EOF first.
_WATCHDOG_CODE = """
import os, select, signal, sys
test_pid, seconds = int(sys.argv[1]), float(sys.argv[2])
if not select.select([sys.stdin], [], [], seconds)[0]:
    print(f"FAIL: overall timeout of {seconds:.0f} s exceeded; killing the test process",
          file=sys.stderr, flush=True)
    os.kill(test_pid, signal.SIGKILL)
"""


def start_watchdog(seconds):
    """Kills this process (and so, by PDEATHSIG, its children) after `seconds`.

    A separate process rather than a thread or a Python signal handler: 1.13's
    TCPStore constructor holds the GIL while it blocks on its ADD "init/" reply,
    with no receive timeout, so nothing inside this interpreter would run.
    """
    return subprocess.Popen([sys.executable, "-c", _WATCHDOG_CODE, str(os.getpid()), str(seconds)],
                            stdin=subprocess.PIPE)


def wait_until(predicate, deadline_s, what, interval_s=0.02):
    """Polls predicate() until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + deadline_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise CheckFailure(f"timed out after {deadline_s} s waiting for {what}")
        time.sleep(interval_s)


class Daemon:
    """A ddprund child on a free loopback port, stopped with SIGTERM on exit."""

    START_DEADLINE_S = 15.0
    STOP_DEADLINE_S = 15.0

    def __init__(self, path, extra_args=()):
        self.path = path
        self.extra_args = list(extra_args)
        self.port = None
        self._proc = None
        self._tmp = None
        self._log_path = None

    def __enter__(self):
        if not os.access(self.path, os.X_OK):
            raise CheckFailure(f"ddprund not executable at {self.path!r}")
        self._tmp = tempfile.TemporaryDirectory(prefix="ddprun-compat-")
        port_file = os.path.join(self._tmp.name, "port")
        self._log_path = os.path.join(self._tmp.name, "ddprund.log")
        cmd = [self.path, "--host", HOST, "--port", "0", "--port-file", port_file,
               *self.extra_args]
        with open(self._log_path, "wb") as log:
            self._proc = spawn(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            self.port = wait_until(lambda: self._read_port(port_file), self.START_DEADLINE_S,
                                   "ddprund to write its --port-file")
        except BaseException:
            # __exit__ never runs when __enter__ raises: clean up here.
            self._proc.kill()
            self._proc.wait()
            print(self.log(), flush=True)
            self._tmp.cleanup()
            raise
        return self

    def _read_port(self, port_file):
        if self._proc.poll() is not None:
            raise CheckFailure(f"ddprund exited with {self._proc.returncode} before listening")
        try:
            with open(port_file) as f:
                text = f.read().strip()
        except FileNotFoundError:
            return None
        return int(text) if text.isdigit() and int(text) > 0 else None

    def log(self):
        with open(self._log_path, errors="replace") as f:
            return "---- ddprund output ----\n" + f.read() + "---- end ddprund output ----"

    def __exit__(self, exc_type, exc, tb):
        failed = exc_type is not None
        try:
            self._stop(check=not failed)
        except CheckFailure:
            failed = True
            raise
        finally:
            # The daemon's own account is the first thing to read when a test fails.
            if failed:
                print(self.log(), flush=True)
            self._tmp.cleanup()
        return False

    def _stop(self, check):
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
        try:
            code = self._proc.wait(timeout=self.STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
            raise CheckFailure(f"ddprund ignored SIGTERM for {self.STOP_DEADLINE_S} s")
        if not check:
            return
        # The daemon's contract: exit 0 on SIGTERM, and announce the bound port.
        expect_eq(code, 0, "ddprund exit code after SIGTERM")
        banner = f"ddprund listening on {HOST}:{self.port}"
        expect_true(banner in self.log(), f"ddprund never printed {banner!r}")


@contextlib.contextmanager
def store_endpoint(args):
    """Yields the port of the store under test: a fresh ddprund, or --port."""
    if args.port:
        yield args.port
        return
    with Daemon(args.daemon) as daemon:
        yield daemon.port


def run_main(main, args):
    """Runs main(args) under the watchdog; maps the outcome to an exit code."""
    watchdog = start_watchdog(args.timeout)
    started = time.monotonic()
    try:
        main(args)
    except CheckFailure as err:
        print(f"FAIL: {err}", flush=True)
        return 1
    except Exception:  # a crash of the client library is a failure too, with its trace
        print("FAIL: unexpected exception", flush=True)
        traceback.print_exc()
        return 1
    finally:
        watchdog.stdin.close()  # EOF: the watchdog exits quietly
        watchdog.wait()
    print(f"PASS ({time.monotonic() - started:.1f} s)", flush=True)
    return 0
