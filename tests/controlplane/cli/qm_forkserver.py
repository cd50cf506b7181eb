"""`python -m controlplane.cli.main` without paying the interpreter's start for every call.

A `qm` subprocess spent ~0.4 s of CPU starting Python and importing the CLI (Django's settings
are not involved; `scheduler_core` imports its engine, `controlplane` imported Celery until 3 Dec) before sending
its one request; the CLI tests make ~600 such calls. Here one server process imports the CLI
once, then forks a child per call: the child is still its own process with its own pipes for
stdin, stdout and stderr, its own environment (HOME, QM_URL, QM_TOKEN...), its own exit status,
and it runs the module as `-m` does (runpy, as `__main__`, with sys.argv[0] the module's file),
then exits as the interpreter would (SystemExit's code, a traceback and 1 for an uncaught
exception, atexit functions, the last flush). What a fork cannot reproduce (a variable read when
the interpreter starts, e.g. PYTHON*, LANG, LC_*, TZ, differing from the server's) goes to a real
subprocess instead (`ForkServer.run` returns None). The tests about the installed `qm` script,
about `qm ... | head` and the `--follow` ones with signals still start real processes of their own.
"""

from __future__ import annotations

import io
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

MODULE = "controlplane.cli.main"
# Read by the interpreter (or a module the CLI imports) when it starts: a difference from the
# server's start environment cannot be applied after the fork.
_AT_START_PREFIXES = ("PYTHON", "LC_")
_AT_START_KEYS = frozenset({"LANG", "LANGUAGE", "TZ"})

_SERVER = r"""
import atexit, json, os, runpy, socket, sys, threading, traceback
sock = socket.socket(fileno=int(sys.argv[1]))
before = dict(os.environ)
import controlplane.cli.main as cli  # the cost the server pays once
# What importing set in the environment (controlplane/celery.py's DJANGO_SETTINGS_MODULE default)
# a fresh interpreter sets again over each call's environment.
set_by_import = {key: value for key, value in os.environ.items() if before.get(key) != value}
path = cli.__file__
# As under `-m`: the package and everything the module imports are loaded, the module itself is
# not (runpy runs it afresh as __main__ in each child, and warns if it finds it in sys.modules).
del sys.modules["controlplane.cli.main"], sys.modules["controlplane.cli"].main, cli
assert threading.active_count() == 1, "a thread at import: forking would be unsafe"


def child(request, fds):
    sock.close()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds):
        if fd > 2:
            os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    for key, value in set_by_import.items():
        os.environ.setdefault(key, value)
    os.chdir(request["cwd"])
    sys.argv = [path, *request["argv"]]
    code = 0
    try:
        runpy.run_module("controlplane.cli.main", run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        if stop.code is None:
            code = 0
        elif isinstance(stop.code, int):
            code = stop.code
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            code = code or 120
    os._exit(code & 0xFF)


while True:
    try:
        message, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, 3)
    except OSError:
        break
    if not message:
        break
    request = json.loads(message)
    pid = os.fork()
    if pid == 0:
        try:
            child(request, fds)
        finally:
            os._exit(99)
    for fd in fds:
        os.close(fd)
    sock.send(json.dumps({"pid": pid}).encode())
    _, status = os.waitpid(pid, 0)
    sock.send(json.dumps({"status": status}).encode())
"""


class ForkServer:
    def __init__(self, env: Mapping[str, str], cwd: Path) -> None:
        self.start_env = dict(env)
        self.cwd = str(cwd)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        self.process = subprocess.Popen(
            [sys.executable, "-c", _SERVER, str(theirs.fileno())], pass_fds=[theirs.fileno()],
            env=self.start_env, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        )
        theirs.close()

    def close(self) -> None:
        self.sock.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _forkable(self, env: Mapping[str, str]) -> bool:
        keys = set(env) | set(self.start_env)
        return all(
            env.get(key) == self.start_env.get(key)
            for key in keys
            if key.startswith(_AT_START_PREFIXES) or key in _AT_START_KEYS
        )

    def run(self, args: list[str], env: Mapping[str, str], stdin: str | None,
            timeout: float) -> tuple[int, str, str] | None:
        """(exit code, stdout, stderr) as `subprocess.run(..., text=True)` gives them, or None
        when this call's environment needs a fresh interpreter."""
        if not self._forkable(env) or self.process.poll() is not None:
            return None
        in_read, in_write = os.pipe() if stdin is not None else (None, None)
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        # No input: the child reads this process's standard input, as subprocess.run's child does.
        child_fds = [0 if in_read is None else in_read, out_write, err_write]
        request = {"argv": list(args), "env": dict(env), "cwd": self.cwd}
        socket.send_fds(self.sock, [json.dumps(request).encode()], child_fds)
        for fd in (in_read, out_write, err_write):
            if fd is not None:
                os.close(fd)
        pid = json.loads(self.sock.recv(1 << 16))["pid"]
        deadline = time.monotonic() + timeout
        data = _encode(stdin) if stdin is not None else b""
        out, err = bytearray(), bytearray()
        with selectors.DefaultSelector() as selector:
            selector.register(out_read, selectors.EVENT_READ, out)
            selector.register(err_read, selectors.EVENT_READ, err)
            if in_write is not None:
                if data:
                    selector.register(in_write, selectors.EVENT_WRITE, None)
                else:
                    os.close(in_write)
            while selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    os.kill(pid, signal.SIGKILL)
                    for key in list(selector.get_map().values()):
                        os.close(key.fd)
                    self.sock.recv(1 << 16)
                    raise subprocess.TimeoutExpired([sys.executable, "-m", MODULE, *args], timeout)
                for key, _ in selector.select(left):
                    if key.data is None:  # stdin
                        try:
                            data = data[os.write(key.fd, data[:65536]):]
                        except BrokenPipeError:
                            data = b""
                        if not data:
                            selector.unregister(key.fd)
                            os.close(key.fd)
                        continue
                    chunk = os.read(key.fd, 65536)
                    if chunk:
                        key.data.extend(chunk)
                    else:
                        selector.unregister(key.fd)
                        os.close(key.fd)
        left = max(deadline - time.monotonic(), 0.001)
        self.sock.settimeout(left)
        try:
            status = json.loads(self.sock.recv(1 << 16))["status"]
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            self.sock.settimeout(None)
            self.sock.recv(1 << 16)
            raise subprocess.TimeoutExpired([sys.executable, "-m", MODULE, *args], timeout) from None
        finally:
            self.sock.settimeout(None)
        return os.waitstatus_to_exitcode(status), _decode(bytes(out)), _decode(bytes(err))


def _encode(text: str) -> bytes:
    """As subprocess.run(text=True) writes `input`: the locale's encoding."""
    buffer = io.BytesIO()
    wrapper = io.TextIOWrapper(buffer, write_through=True)
    wrapper.write(text)
    wrapper.flush()
    return buffer.getvalue()


def _decode(data: bytes) -> str:
    """As subprocess.run(text=True) reads output: the locale's encoding, universal newlines."""
    return io.TextIOWrapper(io.BytesIO(data)).read()
