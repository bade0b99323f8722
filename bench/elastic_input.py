"""The cost of elastic input: training examples/s with a plain FileReader vs the same file through the
shard service, every batch reported after the step that trained it.

Six trainers, each training its own copy of the model in a process of its own, taking turns of `--steps`
steps (timing.RoundRobin, in a fresh order each cycle), so that all are timed under the same machine
conditions and none is charged for what another sets for its whole process:
  file_reader        the plain FileReader pipeline (no service)
  elastic            the service in the training process, as the chief (or a local job) hosts it
  elastic_remote     the service in another process (`elastimator shard-service`), as every worker but the
                     chief reaches it: reports and shard requests over the report line, the rest over gRPC
  elastic_grpc       the same, with reports and requests over gRPC too (the service's report line off), as
                     before the line
  elastic_floor      the service in the training process, and no per-step report protocol: the step's tags
                     are fetched, and the batches reported 25 at a time (FLOOR_REPORTS), with no write gate. Not
                     a mode elastimator offers (a failure could replay 25 batches, not one): what the elastic
                     input itself costs, the floor under any report protocol that keeps the bound
  file_reader_again  the plain pipeline once more: the control, whose "cost" is the measurement's noise
The remote services run on the same cores as the trainers, as a local cluster's chief does.
With `--against REV`, elastic@REV and elastic_remote@REV train with another version of elastimator (a git
worktree of REV, its own processes and service): a change's cost or gain, side by side in one run.
Each of `--rounds` rounds starts fresh processes (a process's own speed varies by a few percent, and a
round's cost by about 5 points); the figures are the medians of the rounds' costs, each with a 90%
bootstrap interval over the rounds. A round's cost is against the mean rate of the plain pipeline's two copies
(one copy's own noise moved every cost of its round alike, by up to 10 points); the control's is the second copy
against the first.

Run:  python bench/elastic_input.py [--rows 200000] [--steps 50] [--runs 10] [--rounds 9] [--against REV]
      (--runs: timed turns per trainer and round)
Results go to bench/results/elastic_input.{json,md}.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples", "criteo"))

import tensorflow as tf  # noqa: E402

import deepfm  # noqa: E402
import generate_data  # noqa: E402
from report import add_timed_run_arguments, median_interval, worktree, write_results  # noqa: E402
from timing import RoundRobin  # noqa: E402

# elastimator itself is imported in each trainer's process, once it knows which version it trains with.

TOKEN = "bench-token"


INPUTS = ("file_reader", "elastic", "elastic_remote", "elastic_grpc", "elastic_floor", "file_reader_again")
AGAINST = ("elastic", "elastic_remote")
"""The contenders that also run another version's code with --against."""
FLOOR_REPORTS = 25
"""elastic_floor reports its batches this many at a time."""


def start_remote_service(model_dir: str, report_port: str = "0", src: str | None = None
                         ) -> tuple[subprocess.Popen, str]:
    """`elastimator shard-service` in its own process (from the source tree `src`, if given); returns it and the
    address it printed."""
    env = dict(os.environ, ELASTIMATOR_JOB_TOKEN=TOKEN, TF_CPP_MIN_LOG_LEVEL="2")
    if src:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    process = subprocess.Popen([sys.executable, "-m", "elastimator.cli", "shard-service", "--model-dir", model_dir,
                                "--report-port", report_port], stdout=subprocess.PIPE, text=True, env=env)
    address = process.stdout.readline().strip()
    if not address:
        process.kill()
        raise RuntimeError("the shard service process printed no address")
    return process, address


@contextlib.contextmanager
def trainer(kind: str, path: str, model_dir: str, args, epochs: int, src: str | None = None, trains: bool = True):
    """The input and hooks of one contender, with its shard service running (from `src`, if given); `trains`
    False for an input iterated on its own (nothing is reported)."""
    from elastimator.data import DataSetSpec, FileReader
    from elastimator.elastic.client import ShardClient
    from elastimator.elastic.feed import ShardFeed, ShardReportHook
    from elastimator.elastic.service import ShardServer, ShardService
    from elastimator.elastic.shards import ShardingSpec

    spec = DataSetSpec(reader=FileReader(path), columns=generate_data.columns(), batch_size=args.batch_size,
                       name="train_set", epoch=epochs)
    server = process = feed = None
    hooks = []
    try:
        if kind in ("elastic", "elastic_floor"):
            server = ShardServer(ShardService(TOKEN)).start()
            client = ShardClient.in_process(server.service, worker="chief-0")
        elif kind in ("elastic_remote", "elastic_grpc"):
            process, address = start_remote_service(os.path.join(model_dir, "service"),
                                                    report_port="0" if kind == "elastic_remote" else "off", src=src)
            client = ShardClient(address, TOKEN, worker="worker-0")
        if kind.startswith("elastic"):
            feed = ShardFeed(client, ShardingSpec(name="train_set", size=spec.reader.data_nums, epochs=epochs,
                                                 shard_size=10 * args.batch_size)).start()
            reports = FloorReportHook if kind == "elastic_floor" else ShardReportHook
            hooks.append(reports.step_hook(feed))
        yield sharded_input(spec, feed), hooks
        if trains and kind == "elastic_remote" and not client.reports_over_line:
            raise RuntimeError("elastic_remote's reports went over gRPC, not the report line: its figure would be "
                               "elastic_grpc's.")
    finally:
        if feed is not None:
            feed.stop()
        if server is not None:
            server.stop()
        if process is not None:
            process.terminate()
            process.wait(timeout=30)


def sharded_input(spec, feed):
    """The input of a contender: the feed's shards, or the plain pipeline. A version before
    elastic/sharded_input.py (`--against` an older REV) took the feed as DataSetInput's `feed=`."""
    from elastimator.data import DataSetInput

    if feed is None:
        return DataSetInput(spec)
    try:
        from elastimator.elastic.sharded_input import ShardedInput
    except ImportError:
        return DataSetInput(spec, feed=feed)
    return ShardedInput(spec, feed)


class FloorReportHook(tf.compat.v1.train.SessionRunHook):
    """elastic_floor's reports: each call fetches its batch's tag, and every FLOOR_REPORTS calls the tags go to the
    service in the training process, with no write gate."""

    @classmethod
    def step_hook(cls, feed):
        from elastimator.estimator.step.training_step import StepHook

        return StepHook(lambda step: cls(feed, step), several_steps_per_call=False)

    def __init__(self, feed, step):
        from elastimator.elastic.shards import SHARD_TAG

        self._feed = feed
        self._tags = step.outputs[SHARD_TAG]
        self._trained: list[list[int]] = []

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self._tags)

    def after_run(self, run_context, run_values):
        self._trained.extend(run_values.results.reshape(-1, 4).tolist())
        if len(self._trained) >= FLOOR_REPORTS:
            self._report()

    def end(self, session):
        self._report()
        self._feed.leave()

    def _report(self) -> None:
        for shard_id, lease, offset, records in self._trained:
            self._feed.client.report(self._feed.dataset.name, shard_id, records, offset=offset, lease=lease)
        self._trained = []


def import_contender(name: str, src: str | None):
    """A contender's kind and its elastimator module, in its own fresh process: a name KIND@REV imports the one
    in the source tree `src` (a worktree of REV) instead of this checkout's. Returns (kind, module, src or None)."""
    kind, _, rev = name.partition("@")
    if rev:
        sys.path.insert(0, src)
    import elastimator

    if rev and not elastimator.__file__.startswith(src):
        raise RuntimeError(f"{name} imported elastimator from {elastimator.__file__}, not from {src}")
    return kind, elastimator, src if rev else None


def train(name: str, turn_hook, path: str, args, steps: int, epochs: int, tmp: str, src: str | None) -> None:
    """One contender, in a process of its own: trains its input's model, taking turns through `turn_hook`.
    A contender named KIND@REV trains with the source tree `src` (a worktree of REV) instead of this one's."""
    kind, est, src = import_contender(name, src)
    model_dir = os.path.join(tmp, name.replace("@", "_at_"))
    with trainer(kind, path, model_dir, args, epochs, src) as (input_fn, hooks):
        estimator = est.Estimator(deepfm.criteo_model_fn, model_dir=os.path.join(model_dir, "model"),
                                  config=est.RunConfig(tf_random_seed=1))
        estimator.train(input_fn, hooks=[*hooks, turn_hook], steps=steps)


def race(path: str, args, seed: int, contenders: tuple[str, ...], src: str | None) -> RoundRobin:
    """Trains one model per contender, each in its own process, in turns; returns the timed turns."""
    # The turn hook acts on every call, so each input runs one step per call, as the elastic feed always does:
    # the figure is the input's cost alone. The turns go in a fresh order each cycle: in a fixed one, the plain
    # pipeline's two copies measured apart by 0 to 5% in every run, always the same way.
    robin = RoundRobin(contenders, steps=args.steps, warmup=args.warmup, seed=seed)
    steps = args.warmup + args.runs * args.steps
    epochs = math.ceil(steps * args.batch_size / args.rows) + 1
    with tempfile.TemporaryDirectory() as tmp:
        robin.run(train, path, args, steps, epochs, tmp, src)
    return robin


def add_against_argument(parser: argparse.ArgumentParser, measure: str) -> None:
    """The --against REV option of the elastic benchmarks; `measure` is what they do with each contender."""
    parser.add_argument("--against", metavar="REV", help=f"also {measure} elastic and elastic_remote with the code "
                        "of this git revision (a worktree), side by side")


def with_against(contenders: tuple[str, ...], rev: str | None) -> tuple[str, ...]:
    """`contenders`, then KIND@REV for each kind that also runs `rev`'s code (none without a rev)."""
    return contenders + tuple(f"{kind}@{rev}" for kind in (AGAINST if rev else ()))


@contextlib.contextmanager
def data_and_worktree(rows: int, rev: str | None):
    """(a Criteo-shaped file of `rows` rows, the `src` folder of a worktree of `rev` or None), both temporary."""
    with tempfile.TemporaryDirectory() as tmp, worktree(rev) as src:
        path = os.path.join(tmp, "criteo.tsv")
        generate_data.generate(path, rows)
        yield path, src


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=9)
    add_against_argument(parser, "train")
    add_timed_run_arguments(parser)
    parser.set_defaults(steps=50, runs=10)
    args = parser.parse_args(argv)
    contenders = with_against(INPUTS, args.against)
    compared = contenders[1:]
    rounds = []
    with data_and_worktree(args.rows, args.against) as (path, src):
        for round_ in range(args.rounds):
            robin = race(path, args, seed=round_, contenders=contenders, src=src)
            rates = {kind: robin.rate(kind, args.batch_size) for kind in contenders}
            rounds.append({"train_examples_per_sec": rates, "cost": costs_of(rates, compared),
                           "cost_against_file_reader": {kind: 1 - rates[kind] / rates["file_reader"]
                                                        for kind in compared}})
    round_costs = {kind: [r["cost"][kind] for r in rounds] for kind in compared}
    cost = {kind: statistics.median(costs) for kind, costs in round_costs.items()}
    against_first = {kind: statistics.median(r["cost_against_file_reader"][kind] for r in rounds) for kind in compared}
    interval = {kind: median_interval(costs) for kind, costs in round_costs.items()}
    result = {"benchmark": "elastic_input", "rows": args.rows, "batch_size": args.batch_size,
              "steps_per_turn": args.steps, "turns": args.runs, "rounds": rounds, "warmup_steps": args.warmup,
              "train_examples_per_sec": {kind: statistics.median(r["train_examples_per_sec"][kind] for r in rounds)
                                         for kind in contenders},
              "throughput_cost": cost["elastic"], "throughput_cost_remote": cost["elastic_remote"],
              "throughput_cost_remote_grpc": cost["elastic_grpc"], "throughput_cost_floor": cost["elastic_floor"],
              "control_cost": cost["file_reader_again"],
              "throughput_cost_interval_90": interval, "throughput_cost_against_file_reader": against_first,
              "machine": f"{os.cpu_count()} CPUs, {platform.platform()}, TF {tf.__version__}"}
    header = "| round | " + " | ".join(f"{kind} ex/s" for kind in contenders) + " | " + " | ".join(
        f"{kind} cost" for kind in compared) + " |\n|" + "---|" * (1 + len(contenders) + len(compared)) + "\n"
    rows = "".join(f"| {i + 1} | " + " | ".join(f"{r['train_examples_per_sec'][k]:,.0f}" for k in contenders)
                   + " | " + " | ".join(f"{r['cost'][k]:.1%}" for k in compared) + " |\n"
                   for i, r in enumerate(rounds))
    markdown = (
        f"# Elastic input vs a plain FileReader\n\nDeepFM-like model on a Criteo-shaped file ({args.rows} "
        f"rows), batch {args.batch_size}. Each trainer runs in a process of its own; they train in turns of "
        f"{args.steps} steps, {args.runs} timed turns each after {args.warmup} warm-up steps, in a fresh random "
        f"order each cycle, so that all see the same machine conditions; each of {args.rounds} rounds starts fresh "
        "processes. `file_reader_again` is the plain pipeline again: its cost (against `file_reader`) is the "
        "measurement's noise; every other cost is against the mean of the two plain copies' rates. "
        f"Machine: {result['machine']}.\n\n"
        + header + rows
        + f"\n**Throughput cost of elastic input (median of the rounds): {cost['elastic']:.1%}** with the service "
        f"in the training process (chief, local job); **{cost['elastic_remote']:.1%}** with the service in "
        f"another process (workers, reports and requests over the report line), {cost['elastic_grpc']:.1%} "
        f"with them over gRPC; the control measured {cost['file_reader_again']:.1%}. Without the per-step "
        f"report protocol (`elastic_floor`: reports {FLOOR_REPORTS} at a time, no write gate) the elastic input "
        f"costs {cost['elastic_floor']:.1%}: the floor under any protocol that keeps the one-batch bound.\n\n"
        "How far each median could move were the rounds run again (90% bootstrap interval over the rounds): "
        + "; ".join(f"{kind} {interval[kind][0]:.1%} to {interval[kind][1]:.1%}" for kind in compared) + ".\n\n"
        "Against `file_reader` alone, as runs before this one measured: "
        + "; ".join(f"{kind} {against_first[kind]:.1%}" for kind in compared if kind != "file_reader_again") + ".\n"
        + (f"\nSide by side with the code of {args.against}: " + "; ".join(
            f"{kind} costs {cost[kind]:.1%} here and {cost[kind + '@' + args.against]:.1%} with {args.against}, "
            f"cheaper here in {_rounds_cheaper(rounds, kind, args.against)} of {len(rounds)} rounds"
            for kind in AGAINST) + ".\n" if args.against else "")
    )
    write_results(args.out, "elastic_input", result, markdown)
    return result


def costs_of(rates: dict[str, float], compared) -> dict[str, float]:
    """One round's costs: each contender's against the mean rate of the plain pipeline's two copies, and the
    control's (the second copy) against the first."""
    plain = (rates["file_reader"] + rates["file_reader_again"]) / 2
    return {kind: 1 - rates[kind] / (rates["file_reader"] if kind == "file_reader_again" else plain)
            for kind in compared}


def _rounds_cheaper(rounds: list[dict], kind: str, rev: str) -> int:
    return sum(r["cost"][kind] < r["cost"][f"{kind}@{rev}"] for r in rounds)


if __name__ == "__main__":
    main()
