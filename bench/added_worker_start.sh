#!/usr/bin/env bash
# How long a worker added by `elastimator scale` takes to train its first step: the census launch of docs/jobs.md
# (1 ps, 2 workers of 3 slots, an evaluator), scaled to 3 once workers 0 and 1 train; prints the seconds from the
# `scale` command to worker-2's progress file (its first step) and the load average, then stops the job (Ctrl-C).
# A measurement of one machine at one moment, not a test: say the load beside the figure.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL_DIR=${1:-/tmp/elastimator-added-worker}
rm -rf "$MODEL_DIR"
echo "cores $(nproc); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
.venv/bin/elastimator launch examples/census/census_conf.py:CensusConf --model-dir "$MODEL_DIR" --ps 1 \
    --workers 2 --max-workers 3 --evaluator --max-steps 12000 --network host > "$MODEL_DIR.launch.log" 2>&1 &
LAUNCHER=$!
trap 'kill -INT $LAUNCHER 2>/dev/null || true' EXIT
until [ -f "$MODEL_DIR/logs/worker-1.progress.json" ]; do kill -0 $LAUNCHER; sleep 0.5; done
asked=$(date +%s.%N)
.venv/bin/elastimator scale "$MODEL_DIR" --workers 3
until [ -f "$MODEL_DIR/logs/worker-2.progress.json" ]; do kill -0 $LAUNCHER; sleep 0.2; done
echo "worker-2's first step $(echo "$(date +%s.%N) - $asked" | bc) s after scale; load average" \
     "$(cut -d' ' -f1-3 /proc/loadavg)"
echo "its log (start, ps found, graph built, first batch):"
grep -E "start \(restart|training against|first batch" "$MODEL_DIR/logs/worker-2.log"
