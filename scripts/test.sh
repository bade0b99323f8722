#!/usr/bin/env bash
# Installs everything, then runs the whole test suite (slow multi-process tests included).
# Extra arguments go to pytest, e.g. `scripts/test.sh -m "not slow"`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Third-party estimator code for the compatibility test; its pinned dependencies predate TF 2.21, hence --no-deps.
.venv/bin/python -m pip install --quiet --no-deps deepctr==0.9.4
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
exec .venv/bin/python -m pytest "$@"
