"""What every fault-trial test asserts of a trial's result, shared by the trial test files.

The seed is random on purpose (kill points and traffic vary from run to run); it is printed in every
failure message, and STREAM_PAIRER_TRIAL_SEED=N reproduces a run.
"""

from __future__ import annotations

import os
import time

import fault_trials as ft  # scripts/ is on sys.path (see conftest.py)

SEED = int(os.environ.get("STREAM_PAIRER_TRIAL_SEED", int(time.time())))


def check(result: ft.TrialResult, exactly_once: bool, seed: int) -> None:
    where = f"seed {seed}: {result.note}\n" + "\n".join(result.problems)
    assert result.events > 0, f"the trial produced no events ({where})"
    assert result.lost == 0, f"{result.lost} events lost ({where})"
    assert result.crashes == 0, f"the sidecar exited by itself or did not stop cleanly ({where})"
    if exactly_once:
        assert result.duplicated == 0, f"{result.duplicated} duplicates in exactly-once mode ({where})"
    assert result.ok, where
