#!/usr/bin/env bash
# What the next TensorFlow breaks: installs the newest tf-nightly and tf-keras-nightly into .venv-tf-nightly with
# elastimator's wheel (--no-deps: the wheel asks for TensorFlow 2.16-2.21), runs the smoke subset of
# scripts/smoke_tf.sh there plus the native-warning check, and writes the outcome, dated, to docs/nightly.md.
# Not part of CI (a nightly is a moving target); run it by hand:
#
#   bash scripts/nightly_check.sh            # install and test
#   bash scripts/nightly_check.sh test       # test an environment installed before
set -euo pipefail
cd "$(dirname "$0")/.."
STEP=${1:-all}
VENV=.venv-tf-nightly
REPORT=docs/nightly.md
# shellcheck source=scripts/smoke_tests.sh
source scripts/smoke_tests.sh
TESTS=("${SMOKE_TESTS[@]}" tests/integration/test_native_warnings.py tests/integration/test_readme.py)

if [ "$STEP" != test ]; then
  rm -rf dist "$VENV"
  .venv/bin/python -m pip install --quiet "build>=1.2"
  .venv/bin/python -m build --wheel --outdir dist . >/dev/null
  "${PYTHON:-python3}" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet --pre tf-nightly tf-keras-nightly tb-nightly
  "$VENV/bin/python" -m pip install --quiet --no-deps "$(ls dist/elastimator-*.whl)"
  # elastimator's other dependencies and its test tools (pyproject.toml), TensorFlow's left as installed.
  "$VENV/bin/python" -m pip install --quiet "numpy>=1.26" "pandas>=2.0" "matplotlib>=3.8" "pyyaml>=6" \
    "kubernetes>=37" "jsonschema>=4" "pytest>=8" "pytest-timeout>=2.3" "scikit-learn>=1.4" "hypothesis>=6.100"
fi
versions=$("$VENV/bin/python" -c "import importlib.metadata as m; \
print(m.version('tf-nightly'), m.version('tf-keras-nightly'))")
log=$(mktemp)
status=0
TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2} "$VENV/bin/python" -m pytest -q -p no:cacheprovider -rfE \
  "${TESTS[@]}" >"$log" 2>&1 || status=$?
summary=$(grep -E "[0-9]+ (passed|failed)" "$log" | tail -1 || true)
{
  echo "# elastimator on tf-nightly"
  echo
  echo "Written by \`scripts/nightly_check.sh\` (not part of CI). The newest check:"
  echo
  echo "- date: $(date -u +%Y-%m-%d)"
  echo "- elastimator: the wheel built from $(git rev-parse --short HEAD 2>/dev/null || echo 'this tree')$(git diff --quiet HEAD 2>/dev/null || echo ' with changes not committed')"
  echo "- tf-nightly and tf-keras-nightly: ${versions}"
  echo "- tests: the TF 2.16 smoke subset, the native-warning check and the README's example"
  echo "- result: ${summary:-no summary line; exit status $status}"
  echo
  if grep -qE "^(FAILED|ERROR) " "$log"; then
    echo "Failed:"
    echo
    grep -E "^(FAILED|ERROR) " "$log" | sed 's/^/- /'
  else
    echo "Nothing failed."
  fi
} >"$REPORT"
cat "$REPORT"
rm -f "$log"
exit $status
