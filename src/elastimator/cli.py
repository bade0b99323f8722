"""`elastimator`: run, export, predict with, inspect and report on jobs.

Exit codes: 0 success, 1 the job failed, 2 bad usage or an invalid conf.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from elastimator.errors import ConfError, ConfigError, ElastimatorError  # noqa: E402

USAGE_ERRORS = (ConfError, ConfigError)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="elastimator", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="also show TensorFlow's own log lines")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="train, evaluate and export the job a conf describes (one process)")
    run.add_argument("conf", help="conf as package.module.Class, path/to/conf.py or path/to/conf.py:Class")
    run.add_argument("--model-dir", help="override the conf's model_dir")
    run.add_argument("--max-steps", type=int, help="override the conf's max_steps")
    run.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")

    export = commands.add_parser("export", help="export a SavedModel from a conf's model_dir")
    export.add_argument("conf")
    export.add_argument("--model-dir", help="override the conf's model_dir")
    export.add_argument("--checkpoint", help="checkpoint prefix to export (default: the newest)")
    export.add_argument("--export-dir", help="base directory (default: <model_dir>/export/manual)")

    predict = commands.add_parser("predict", help="batch predictions from an exported SavedModel")
    predict.add_argument("--saved-model", required=True, help="an export directory (export/<name>/<timestamp>)")
    predict.add_argument("--input", required=True, help="delimited file whose header names the model's inputs")
    predict.add_argument("--output", help="CSV file for the predictions (default: standard output)")
    predict.add_argument("--batch-size", type=int, default=1024)
    predict.add_argument("--field-delim", default=",")
    predict.add_argument("--signature", default="serving_default")

    inspect = commands.add_parser("inspect", help="checkpoints, last metrics and exports of a model_dir")
    inspect.add_argument("model_dir")

    report = commands.add_parser("report", help="write a PNG of training loss and eval metrics over steps")
    report.add_argument("model_dir")
    report.add_argument("--output", help="PNG path (default: <model_dir>/report.png)")
    service = commands.add_parser("shard-service", help="run a job's shard service on its own (not in the chief)")
    service.add_argument("--model-dir", required=True, help="the job's model_dir (seals live in <model_dir>/shards)")
    service.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    service.add_argument("--port", type=int, default=0, help="port (default: any free one, printed)")
    service.add_argument("--worker-timeout-secs", type=float, default=30.0)
    return parser


def _configure_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    if not verbose:
        import tensorflow as tf

        tf.get_logger().setLevel(logging.ERROR)


def _run(args) -> int:
    from elastimator.job.conf import load_conf
    from elastimator.job.executor import run_job
    from elastimator.job.inspect_dir import metrics_rows, table

    conf = load_conf(args.conf)
    overrides = {k: v for k, v in (("model_dir", args.model_dir), ("max_steps", args.max_steps)) if v is not None}
    conf = dataclasses.replace(conf, **overrides)
    result = run_job(conf, show_progress=not args.no_progress)
    rows = [("model_dir", result.model_dir), ("global step", str(result.global_step))]
    rows += metrics_rows(result.metrics or {})
    rows += [("export", path) for path in result.exports]
    rows += [(f"bad records ({name})", str(count)) for name, count in result.bad_records.items()]
    print(f"\njob {conf.name} finished\n" + table(rows))
    return 0


def _export(args) -> int:
    from elastimator.data.dataset import serving_input_receiver_fn
    from elastimator.job.conf import load_conf
    from elastimator.job.executor import build_estimator, run_config

    conf = load_conf(args.conf)
    if args.model_dir:
        conf = dataclasses.replace(conf, model_dir=args.model_dir)
    estimator = build_estimator(conf, run_config(conf))
    base = args.export_dir or os.path.join(estimator.model_dir, "export", "manual")
    path = estimator.export_saved_model(base, serving_input_receiver_fn(conf.train_set.columns),
                                        checkpoint_path=args.checkpoint)
    print(path.decode())
    return 0


def _predict(args) -> int:
    from elastimator.job.batch_predict import predict_file

    if args.batch_size <= 0:
        raise ConfError(f"--batch-size must be > 0; got {args.batch_size}.")
    output = open(args.output, "w", newline="") if args.output else None
    try:
        rows = predict_file(args.saved_model, args.input, output, args.batch_size, args.field_delim, args.signature)
    finally:
        if output:
            output.close()
    logging.getLogger("elastimator").info("Wrote predictions for %d row(s)%s.", rows,
                                          f" to {args.output}" if args.output else "")
    return 0


def _inspect(args) -> int:
    from elastimator.job.inspect_dir import inspect_model_dir, render

    print(render(inspect_model_dir(args.model_dir)))
    return 0


def _report(args) -> int:
    from elastimator.job.report import write_report

    print(write_report(args.model_dir, args.output))
    return 0


def _shard_service(args) -> int:
    import signal
    import threading

    from elastimator.elastic.feed import ServiceConfig
    from elastimator.elastic.service import serve

    server = serve(args.model_dir, ServiceConfig.token_from_env(), args.host, args.port, args.worker_timeout_secs)
    print(server.address, flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.stop()
    return 0


COMMANDS = {"run": _run, "export": _export, "predict": _predict, "inspect": _inspect, "report": _report,
            "shard-service": _shard_service}


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    _configure_logging(args.verbose)
    try:
        return COMMANDS[args.command](args)
    except USAGE_ERRORS as e:
        print(f"elastimator: error: {e}", file=sys.stderr)
        return 2
    except ElastimatorError as e:
        print(f"elastimator: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("elastimator: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
