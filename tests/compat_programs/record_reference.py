"""Records what tf.estimator 2.15 does with each program in programs/, for test_programs.py to compare with.

    python tests/compat_programs/record_reference.py   # needs bench/.venv-tf215 (bench/frameworks.py makes it)
    python tests/compat_programs/record_reference.py hook_steps   # records those programs again, keeps the rest

Each program runs unedited on TensorFlow 2.15.1 + tensorflow-estimator 2.15.0 and its `RESULT {json}` line
is stored in reference_tf215.json with the versions it ran on. CI does not install TF 2.15: it compares
elastimator's runs with this file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PYTHON = os.path.join(ROOT, "bench", ".venv-tf215", "bin", "python")
OUTPUT = os.path.join(HERE, "reference_tf215.json")
RUNS = {"linear_sdca": 8, "deepctr_models": 2, "easyrec_models": 3}
"""Programs whose results tf.estimator 2.15 itself varies from run to run (SDCA visits a batch's examples in a
random order; unseeded initializers), or whose spread over seeds the tests compare with, run this many times: the
first run is the program's entry, the others its "other_runs". Each run has its number in COMPAT_PROGRAM_RUN (0 for
the first), which a program may take as its seed."""


def result_of(stdout: str) -> dict:
    return json.loads(next(line for line in stdout.splitlines() if line.startswith("RESULT "))[len("RESULT "):])


def tf215_versions() -> list[str] | None:
    """tensorflow-cpu's and tensorflow-estimator's versions in the TF 2.15 environment, or None (said on stderr)
    where it is missing."""
    if not os.path.exists(PYTHON):
        print(f"{PYTHON} is missing: run bench/frameworks.py once (it creates the TF 2.15 environment).",
              file=sys.stderr)
        return None
    version = subprocess.run([PYTHON, "-c", "import importlib.metadata as m; "
                              "print(m.version('tensorflow-cpu'), m.version('tensorflow-estimator'))"],
                             capture_output=True, text=True, check=True)
    return version.stdout.split()


def main() -> int:
    versions = tf215_versions()
    if versions is None:
        return 2
    results = {"versions": versions}
    chosen = sys.argv[1:]
    if chosen:
        with open(OUTPUT) as f:
            results = {**json.load(f), **results}
    for name in sorted(os.listdir(os.path.join(HERE, "programs"))):
        if not name.endswith(".py") or name.startswith("_") or (chosen and name.removesuffix(".py") not in chosen):
            continue
        program = name.removesuffix(".py")
        runs = []
        for number in range(RUNS.get(program, 1)):
            with tempfile.TemporaryDirectory() as model_dir:
                run = subprocess.run([PYTHON, os.path.join(HERE, "programs", name), os.path.join(model_dir, "m")],
                                     capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
                                              COMPAT_PROGRAM_RUN=str(number)))
            if run.returncode != 0:
                print(f"{name} failed on TF 2.15:\n{run.stderr[-3000:]}", file=sys.stderr)
                return 1
            runs.append(result_of(run.stdout))
        results[program] = {**runs[0], "other_runs": runs[1:]} if len(runs) > 1 else runs[0]
        print(name, runs[0])
    with open(OUTPUT, "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
