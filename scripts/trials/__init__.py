"""The fault trials' parts; scripts/fault_trials.py is the command that runs them.

Why a package: the trials grew past what one module holds readably (issue 23's 600-line bound).
traffic.py makes the input, harness.py is what every trial shares (topics, produce, audit, the
sidecar subprocess, the result), crash.py holds the trials that crash the sidecar or the brokers,
produce_side.py the output-side faults of issue 13. scripts/ must be on sys.path (fault_trials.py
and tests/integration/conftest.py put it there): kafka_broker.py is imported as a sibling script.
"""
