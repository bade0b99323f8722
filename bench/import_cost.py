"""What importing costs: elastimator beside TensorFlow 2.21 and beside tf.estimator 2.15, in fresh processes.

Run:  python bench/import_cost.py [--runs 5]

Each contender is one `python -c` program, run `--runs` times interleaved; the table gives the median wall time
of the import (measured inside the process) and the process's peak RSS (from wait4). The tf.estimator 2.15
contender runs in bench/.venv-tf215 (made by bench/frameworks.py) and is skipped when that is missing.
Output: bench/results/import_cost.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

from report import RESULTS, write_results

HERE = os.path.dirname(os.path.abspath(__file__))
TF215 = os.path.join(HERE, ".venv-tf215", "bin", "python")
HEAVY = ("keras", "tf_keras", "pandas", "matplotlib", "sklearn", "scipy")

CONTENDERS = {
    "import elastimator": (sys.executable, "import elastimator"),
    "elastimator imports TensorFlow": (sys.executable, "import elastimator as est\nest.Estimator"),
    "import tensorflow, then elastimator": (sys.executable, "import tensorflow\nimport elastimator as est\n"
                                                            "est.Estimator"),
    "import tensorflow (2.21, Keras 3)": (sys.executable, "import tensorflow"),
    "import tensorflow, tensorflow_estimator (2.15)": (TF215, "import tensorflow\nimport tensorflow_estimator"),
}
_WRAPPER = """
import sys, time
start = time.perf_counter()
{code}
import json
print(json.dumps({{"secs": time.perf_counter() - start, "loaded": sorted(m for m in {heavy!r} if m in sys.modules)}}))
"""


def run_once(python: str, code: str) -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TF_USE_LEGACY_KERAS", None)  # each program as a user would start it
    process = subprocess.Popen([python, "-c", _WRAPPER.format(code=code, heavy=HEAVY)], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, env=env)
    out = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{python} -c {code!r} failed")
    return {**json.loads(out.strip().splitlines()[-1]), "peak_rss_mb": usage.ru_maxrss / 1024}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", default=RESULTS)
    args = parser.parse_args(argv)
    contenders = {name: c for name, c in CONTENDERS.items() if os.path.exists(c[0])}
    samples: dict[str, list[dict]] = {name: [] for name in contenders}
    for _ in range(args.runs):
        for name, (python, code) in contenders.items():
            samples[name].append(run_once(python, code))
    rows = {name: {"secs": statistics.median(s["secs"] for s in runs),
                   "peak_rss_mb": statistics.median(s["peak_rss_mb"] for s in runs),
                   "loaded": runs[-1]["loaded"]} for name, runs in samples.items()}
    result = {"machine": f"{os.cpu_count()} CPUs, {platform.platform()}", "runs": args.runs, "median": rows}
    lines = ["# Import cost\n\n",
             f"Median of {args.runs} interleaved runs, each a fresh process. Machine: {result['machine']}.\n\n",
             "| program | import time | peak RSS | of keras, tf_keras, pandas, matplotlib, sklearn, scipy, loaded |\n"
             "|---|---|---|---|\n"]
    lines += [f"| `{name}` | {r['secs']:.2f} s | {r['peak_rss_mb']:,.0f} MB | {', '.join(r['loaded']) or '-'} |\n"
              for name, r in rows.items()]
    write_results(args.out, "import_cost", result, "".join(lines))
    return result


if __name__ == "__main__":
    main()
