#!/usr/bin/env bash
# Tests elastimator as users install it, on another TensorFlow: builds the wheel and the sdist, installs the
# wheel (not the checkout) into .venv-tf<VERSION> beside that TensorFlow and its tf-keras, and runs a smoke
# subset there: the engine, train_and_evaluate, exports, a conf job with its export and batch serving.
#
#   bash scripts/smoke_tf.sh 2.16            # prepare and test (2.16, the oldest supported, by default)
#   bash scripts/smoke_tf.sh 2.16 prepare    # only build and install (scripts/test.sh runs this early)
#   bash scripts/smoke_tf.sh 2.16 test       # only test a prepared environment
set -euo pipefail
cd "$(dirname "$0")/.."
TF=${1:-2.16}
STEP=${2:-all}
VENV=.venv-tf$TF
# shellcheck source=scripts/smoke_tests.sh
source scripts/smoke_tests.sh

if [ "$STEP" != test ]; then
  rm -rf dist "$VENV"
  .venv/bin/python -m pip install --quiet "build>=1.2"
  .venv/bin/python -m build --outdir dist . >/dev/null
  ls dist/elastimator-*.whl dist/elastimator-*.tar.gz >/dev/null  # both were built
  "${PYTHON:-python3}" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet "$(ls dist/elastimator-*.whl)[test]" "tensorflow==$TF.*" "tf-keras==$TF.*"
fi
if [ "$STEP" != prepare ]; then
  # The tests must exercise the installed wheel: nothing on the path may point into src/.
  "$VENV/bin/python" -c "import elastimator, tensorflow as tf, sys; \
assert '/site-packages/' in elastimator.__file__, elastimator.__file__; \
assert tf.__version__.startswith('$TF.'), tf.__version__; \
print(f'smoke test: elastimator wheel on TensorFlow {tf.__version__}')"
  if [ "$(uname)" = Linux ] && command -v cc >/dev/null; then  # a compiler here: the wheel has the native line
    "$VENV/bin/python" -c "from elastimator.elastic import report_line_server; assert report_line_server.NATIVE, \
'the wheel has no native report line (_line_native): see the build log'"
  fi
  export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
  "$VENV/bin/python" -m pytest -q -p no:cacheprovider "${SMOKE_TESTS[@]}"
fi
