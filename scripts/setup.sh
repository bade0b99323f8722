#!/usr/bin/env bash
# Creates .venv (if needed) and installs elastimator with its test dependencies into it, on TensorFlow 2.21
# (the package accepts 2.16 through 2.21; scripts/smoke_tf.sh tests another one).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# On a terminal pip shows its progress (the first install downloads about 600 MB); in CI and logs it stays quiet.
if [ -t 1 ] && [ -z "${CI:-}" ]; then
  quiet=()
  echo "setup: installing elastimator, TensorFlow 2.21 and the test tools into .venv (the first time downloads" \
       "about 600 MB; a few minutes)"
else
  quiet=(--quiet)
fi
.venv/bin/python -m pip install "${quiet[@]}" --upgrade pip
.venv/bin/python -m pip install "${quiet[@]}" -e ".[test]" "tensorflow==2.21.*" "tf-keras==2.21.*"
[ -t 1 ] && [ -z "${CI:-}" ] && echo "setup: .venv is ready"
true
