"""No native TensorFlow warning that tf.estimator 2.15 did not print: above all TensorFlow's `c_api.cc` one, "Operation
... was changed by setting attribute after it was run by a session" (a graph mutated under a session that had run
it; TensorFlow says it will become an error). Each run is a fresh process with TensorFlow's native log on."""

import os
import subprocess
import sys
from concurrent import futures

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PROGRAM = os.path.join(os.path.dirname(__file__), "native_warnings_program.py")
RUNS = 10
NATIVE = ("W0000 ", "E0000 ")
"""absl's prefixes of a native warning or error line (the date field is zeros before absl's log is set up)."""
DEVICE_PROBES = ("cuda_platform.cc", "cuda_executor.cc", "cuda_diagnostics.cc")
"""TensorFlow's own GPU probing at its first session, printed by any TensorFlow program on a machine without CUDA
drivers: not a line elastimator causes."""


def _native_lines(model_root: str) -> tuple[list[str], str]:
    run = subprocess.run([sys.executable, PROGRAM, model_root], capture_output=True, text=True, timeout=900,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0"})
    assert run.returncode == 0 and run.stdout.splitlines()[-1] == "DONE", run.stderr[-3000:]
    lines = [line for line in run.stderr.splitlines()
             if line.startswith(NATIVE) and not any(probe in line for probe in DEVICE_PROBES)]
    return lines, run.stderr


def test_kept_and_fresh_graphs_never_mutate_an_op_a_session_ran(tmp_path):
    with futures.ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(_native_lines, [str(tmp_path / f"run{i}") for i in range(RUNS)]))
    for lines, _ in runs:
        assert lines == [], lines
    # The runs did print TensorFlow's native log: a test that could not see the line would pass for nothing.
    assert all("I0000 " in stderr for _, stderr in runs)
