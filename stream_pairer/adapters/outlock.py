"""One writer per output directory, and no temporary files left by a stopped run (issue 27).

Two runs into one `--out` both exited 0 and the last rename won, each output file possibly from a
different run. `OutputLock` takes an exclusive `flock` on `.stream-pairer.lock` in the directory
for the whole run; a second run is refused at once with one line naming the holder (its pid, host
and start time, written in the lock file). The kernel drops the lock when its holder exits, however
it exits, so a killed run never leaves a stale lock. The lock file is removed at the end (while
still locked); a run that locked a file just removed sees that its inode is no longer at the path
and locks again, so two runs never hold two different lock files for one directory.

`stop_on_signals` turns SIGTERM and SIGINT into a `Stopped` exception, so the run unwinds through
the output writer's `abort` (its temporary files removed, earlier outputs untouched) instead of
dying with them in place (a 256 MB `.tmp` was left by SIGTERM).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Final

from stream_pairer.errors import InputError, OutputRefused, Stopped

LOCK_NAME: Final = ".stream-pairer.lock"


class OutputLock:
    """The exclusive right to write `out_dir`, held from `__enter__` to `__exit__`."""

    def __init__(self, out_dir: Path, flag: str = "--out") -> None:
        self.out_dir = out_dir
        self.flag = flag  # what the refusal names: `--out`, or `--state` for a state directory
        self.path = out_dir / LOCK_NAME
        self._fd = -1
        self._made_dir = False

    def __enter__(self) -> OutputLock:
        for _ in range(100):  # retried only when the holder removed the file under us
            fd = self._lock()
            st = os.fstat(fd)
            try:
                now = os.stat(self.path, follow_symlinks=False)
            except FileNotFoundError:
                now = None
            if now is not None and (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                break
            os.close(fd)
        else:
            raise InputError(f"cannot lock {self.out_dir}: its lock file keeps being replaced")
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        note = f"stream-pairer pid {os.getpid()} on {socket.gethostname()} since {started}\n"
        os.ftruncate(fd, 0)
        os.pwrite(fd, note.encode(), 0)
        self._fd = fd
        return self

    def _lock(self) -> int:
        try:
            if not self.out_dir.exists():
                self.out_dir.mkdir(parents=True)
                self._made_dir = True
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as err:
            raise InputError(f"cannot lock {self.out_dir}: {err.strerror or err}") from err
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or "another run"
            os.close(fd)
            raise OutputRefused(
                f"refusing {self.flag} {self.out_dir}: it is being written by {holder}; wait for that run "
                "to end or choose another directory"
            ) from None
        except OSError as err:
            os.close(fd)
            raise InputError(f"cannot lock {self.out_dir}: {err.strerror or err}") from err
        return fd

    def __exit__(self, *exc: object) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.unlink(self.path)  # still locked: see the module's docstring
            os.close(self._fd)  # releases the lock
            self._fd = -1
        if self._made_dir:  # a run refused before writing leaves no directory behind
            with contextlib.suppress(OSError):
                self.out_dir.rmdir()  # only if still empty


@contextlib.contextmanager
def stop_on_signals(signums: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> Iterator[None]:
    """Within the block, a stop signal raises `Stopped` where the run is, so `with` blocks clean
    up; the previous handlers are restored after."""

    def stop(signum: int, _frame: FrameType | None) -> None:
        raise Stopped(signum, signal.Signals(signum).name)

    previous = {s: signal.signal(s, stop) for s in signums}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
