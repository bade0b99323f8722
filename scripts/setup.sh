#!/usr/bin/env bash
# Creates .venv (if needed) and installs elastimator with its test dependencies into it, on TensorFlow 2.21
# (the package accepts 2.16 through 2.21; scripts/smoke_tf.sh tests another one).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[test]" "tensorflow==2.21.*" "tf-keras==2.21.*"
