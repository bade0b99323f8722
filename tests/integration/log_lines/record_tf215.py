"""Records what tf.estimator 2.15 prints for the programs here, for test_log_lines.py to compare with.

    python tests/integration/log_lines/record_tf215.py   # needs bench/.venv-tf215 (bench/frameworks.py makes it)

Each program runs on TensorFlow 2.15.1 + tensorflow-estimator 2.15.0 at INFO verbosity and at TensorFlow's default
one, with TensorFlow's native log level left at its default; the kinds of its lines (`screen.py`) are stored in
tf215.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
PYTHON = os.path.join(ROOT, "bench", ".venv-tf215", "bin", "python")
OUTPUT = os.path.join(HERE, "tf215.json")
PROGRAMS = ("custom_program", "canned_program")
SCREENS = ("info", "default")

sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)
import screen  # noqa: E402  pylint: disable=wrong-import-position
from tests.compat_programs import record_reference  # noqa: E402  pylint: disable=wrong-import-position


def main() -> int:
    versions = record_reference.tf215_versions()
    if versions is None:
        return 2
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    recorded: dict = {"versions": versions}
    for program in PROGRAMS:
        for shown in SCREENS:
            with tempfile.TemporaryDirectory() as model_dir:
                stderr = screen.run([PYTHON], os.path.join(HERE, f"{program}.py"), os.path.join(model_dir, "m"),
                                    shown, env)
            recorded[f"{program} {shown}"] = {"info": screen.info_kinds(stderr),
                                              "warnings": sorted(set(screen.warning_kinds(stderr)))}
            print(program, shown, len(recorded[f"{program} {shown}"]["info"]), "INFO lines")
    with open(OUTPUT, "w") as f:
        json.dump(recorded, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
