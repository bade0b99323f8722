#!/usr/bin/env bash
# Installs everything, then runs the bundled census job: trains wide & deep on UCI Adult,
# evaluates, exports the best model, and prints a summary. Extra arguments go to `elastimator run`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "example: training the census job (examples/census/census_conf.py:CensusConf); TensorFlow takes a few" \
     "seconds to load" >&2
exec .venv/bin/elastimator run examples/census/census_conf.py:CensusConf "$@"
