#!/usr/bin/env bash
# Installs everything, then runs the whole test suite (slow multi-process tests included) on TensorFlow 2.21,
# and the smoke subset on the built wheel with TensorFlow 2.16 (scripts/smoke_tf.sh), whose environment is
# downloaded and installed while the suite runs.
# The test files run in TEST_WORKERS (2) processes, a file's tests in one of them (pytest-xdist; TEST_WORKERS=0
# runs them in this one). Extra arguments go to pytest and skip the smoke run, e.g. `scripts/test.sh -m "not slow"`;
# SMOKE_TF=2.18 smokes another version, SMOKE_TF= none.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Frameworks built on tf.estimator, for the compatibility tests (tests/compat_programs/test_frameworks.py,
# tests/integration/test_deepctr.py). They pin TensorFlow releases before 2.16, hence --no-deps; what they import
# besides TensorFlow comes on the second line.
.venv/bin/python -m pip install --quiet --no-deps deepctr==0.9.4 tensorflow-ranking==0.5.5 adanet==0.9.0 \
  tensorflow-gan==2.1.0 pai-easy-rec==0.7.1 tensorflow-hub==0.16.1 neural-structured-learning==1.4.0 \
  tensorflow-lattice==2.0.13 mesh-tensorflow==0.1.21
.venv/bin/python -m pip install --quiet "tensorflow-probability==0.25.*" "future>=1.0" "gin-config>=0.5"
SMOKE_TF=${SMOKE_TF-2.16}
prepare_log=${TMPDIR:-/tmp}/elastimator-smoke-prepare.log
if [ $# -eq 0 ] && [ -n "$SMOKE_TF" ]; then
  bash scripts/smoke_tf.sh "$SMOKE_TF" prepare >"$prepare_log" 2>&1 &
  prepare=$!
fi
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
status=0
.venv/bin/python -m pytest -n "${TEST_WORKERS:-2}" --dist loadfile "$@" || status=$?
if [ -n "${prepare:-}" ]; then
  if ! wait "$prepare"; then
    echo "Preparing the TensorFlow $SMOKE_TF smoke environment failed:" >&2
    cat "$prepare_log" >&2
    exit 1
  fi
  bash scripts/smoke_tf.sh "$SMOKE_TF" test || status=$?
fi
exit $status
