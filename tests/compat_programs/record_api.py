"""Records tf.estimator 2.15's public API (names, signatures, members) into api_tf215.json.

    bench/.venv-tf215/bin/python tests/compat_programs/record_api.py   # bench/frameworks.py makes that venv

CI does not install TF 2.15: test_api_reference.py compares elastimator's API with this file.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import api_surface  # noqa: E402  (a sibling file; this script runs outside the test package)

OUTPUT = os.path.join(HERE, "api_tf215.json")


def main() -> int:
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    versions = [importlib.metadata.version(p) for p in ("tensorflow-cpu", "tensorflow-estimator")]
    described = api_surface.surface({"tf.estimator": tf.estimator, "tf.compat.v1.estimator": tf.compat.v1.estimator})
    with open(OUTPUT, "w") as f:
        json.dump({"versions": versions, "api": described}, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{len(described)} names written to {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
