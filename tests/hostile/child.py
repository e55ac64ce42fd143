"""Running the CLI as a user does, in a child process, with its peak memory.

The hostile-input tests (issue 27) assert outcomes a user sees: the exit status, the lines on
stderr (one line, no traceback), the output records, and the child's peak resident memory, read
from the kernel's accounting of that child (`os.wait4`'s `ru_maxrss`), never from a timer.

A child forked from pytest starts with pytest's resident pages counted in its peak (the high-water
mark survives fork and exec), so the CLI is started by a small launcher (a fresh interpreter of a
few MB) that forks and execs it and reports the CLI's own `ru_maxrss` on a pipe.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Run:
    rc: int
    out: str
    err: str
    peak_mb: float  # the child's peak resident set size

    def one_line(self) -> str:
        """The single stderr line of a refusal (asserts there is exactly one, and no traceback)."""
        lines = self.err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in self.err, self.err
        return lines[0]


# Forks and execs argv[2:], passes SIGTERM/SIGINT on to it, and writes "status maxrss_kb" of that
# child (wait4: its own rusage) to the file descriptor argv[1].
LAUNCHER = """
import os, signal, sys
fd = int(sys.argv[1])
pid = os.fork()
if pid == 0:
    os.close(fd)
    os.execv(sys.argv[2], sys.argv[2:])
for s in (signal.SIGTERM, signal.SIGINT):
    signal.signal(s, lambda n, f: os.kill(pid, n))
while True:
    try:
        _, status, usage = os.wait4(pid, 0)
        break
    except InterruptedError:
        continue
os.write(fd, f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}".encode())
"""


class Child:
    """A CLI run in progress; `signal` reaches the CLI itself (through the launcher)."""

    def __init__(self, args: tuple[str, ...], cwd: Path | None) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self._read, write = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, str(write), sys.executable, "-m", "stream_pairer", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(write,),
        )
        os.close(write)

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait_until(self, condition: Callable[[], bool]) -> None:
        """Poll for a state of the run (not a timing): fails at once if the run ended first."""
        while not condition():
            if self.proc.poll() is not None:
                run = self.finish()
                raise AssertionError(f"the run ended first: {run}")
            time.sleep(0.05)

    def finish(self, timeout: float = 120) -> Run:
        out, err = self.proc.communicate(timeout=timeout)
        with os.fdopen(self._read, "rb") as f:
            status, maxrss = f.read().split()
        code = int(status)
        rc = code if code >= 0 else 128 - code
        return Run(rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), int(maxrss) / 1024)


def start(*args: str, cwd: Path | None = None) -> Child:
    return Child(args, cwd)


def cli(*args: str, cwd: Path | None = None) -> Run:
    return start(*args, cwd=cwd).finish()


def records(out: Path, name: str) -> list[dict[str, Any]]:
    path = out / name
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def assert_conserved(inputs: list[str], out: Path, *extra: str) -> None:
    """`audit` re-reads the inputs and finds every event in exactly one output record."""
    run = cli("audit", "--input", *inputs, "--outputs", str(out), "-q", *extra)
    assert run.rc == 0 and "audit OK" in run.out, run.out + run.err


def no_litter(out: Path) -> None:
    """No temporary file and no lock file left in the output directory."""
    if out.exists():
        left = [p.name for p in out.iterdir() if p.name.startswith(".")]
        assert left == [], left


def tool_use(i: int, prefix: str = "c") -> dict[str, Any]:
    return {"type": "tool_use", "id": f"{prefix}{i}", "name": "t", "input": {"q": i}}


def call_line(i: int) -> str:
    return json.dumps({"type": "tool_call", "id": f"c{i}", "name": "t", "arguments": {"i": i}}) + "\n"
