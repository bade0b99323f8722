#!/usr/bin/env bash
# Installs everything, then trains, evaluates, exports and serves the bundled example.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
exec .venv/bin/python examples/digits_cnn.py "$@"
