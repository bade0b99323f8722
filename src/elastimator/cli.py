"""`elastimator`: run, export, predict with, inspect and report on jobs.

Exit codes: 0 success, 1 the job failed, 2 bad usage, an invalid conf or a path that names nothing, 3 (`run`) the job failed in a way a
restart would repeat (a NaN loss, too many malformed records, a model_fn or input_fn that returns the
wrong thing: `launch` ends the job on it instead of retrying), 130 interrupted.
Answering `--help` and parsing arguments never imports TensorFlow; a failure is one line on stderr
(its traceback with `--verbose`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import sys
import time
import traceback

from elastimator.errors import (
    ConfError,
    ConfigError,
    ElastimatorError,
    ExportError,
    HeadError,
    InputFnError,
    MissingPathError,
    ModelFnError,
    OUT_OF_RESTARTS_EXIT,
    REPEATING_EXIT,
    RETRY_EXIT,
    USAGE_EXIT,
    ReaderError,
)
from elastimator.cluster.pod_budget import ENV as POD_BUDGET_ENV, OutOfRestarts

USAGE_ERRORS = (ConfError, ConfigError, MissingPathError)
REPEATING_ERRORS = (ReaderError, ModelFnError, InputFnError, HeadError, ExportError)
"""Failures that a restarted process would meet again, with NanLossError (see `_repeats`)."""


def _repeats(error: Exception) -> bool:
    # NanLossError is a TensorFlow exception type, made once TensorFlow has loaded: read it only if it exists.
    nan_loss = vars(sys.modules["elastimator.errors"]).get("NanLossError")
    return isinstance(error, REPEATING_ERRORS) or (nan_loss is not None and isinstance(error, nan_loss))


TRACEBACKS_ENV = "ELASTIMATOR_TRACEBACKS"
"""Set (to 1) to print the traceback of an unexpected error without `--verbose`; the launcher sets it for
its processes, whose output goes to their log files."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="elastimator", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="also show TensorFlow's own log lines")
    # Each command takes --verbose too (`elastimator run --verbose conf.py`); given there, it is not reset.
    verbose = argparse.ArgumentParser(add_help=False)
    verbose.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                         help="also show TensorFlow's own log lines")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, **kwargs) -> argparse.ArgumentParser:
        return commands.add_parser(name, parents=[verbose], **kwargs)

    run = command("run", help="train, evaluate and export the job a conf describes (one process)")
    run.add_argument("conf", help="conf as package.module.Class, path/to/conf.py or path/to/conf.py:Class")
    run.add_argument("--model-dir", help="override the conf's model_dir")
    run.add_argument("--max-steps", type=int, help="override the conf's max_steps")
    run.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")
    run.add_argument("--no-summary", action="store_true",
                     help="print no summary at the end (`launch` prints one for the whole job)")

    export = command("export", help="export a SavedModel from a conf's model_dir")
    export.add_argument("conf", help="conf as package.module.Class, path/to/conf.py or path/to/conf.py:Class")
    export.add_argument("--model-dir", help="override the conf's model_dir")
    export.add_argument("--checkpoint", help="checkpoint prefix to export (default: the newest)")
    export.add_argument("--export-dir", help="base directory (default: <model_dir>/export/manual)")

    predict = command("predict", help="batch predictions from an exported SavedModel")
    predict.add_argument("--saved-model", required=True,
                         help="an export (export/<name>/<timestamp>), an export base (export/<name>), or a model_dir: "
                              "the newest export under it is used")
    predict.add_argument("--input", required=True, help="delimited file whose header names the model's inputs")
    predict.add_argument("--output", help="CSV file for the predictions (default: standard output)")
    predict.add_argument("--batch-size", type=int, default=1024,
                         help="rows per call of the model (default 1024); memory grows with it")
    predict.add_argument("--field-delim", default=",", help="the input's field separator (default ','; '\\t' for TSV)")
    predict.add_argument("--signature", default="serving_default",
                         help="which signature of the SavedModel to call (default serving_default)")
    predict.add_argument("--keep-columns", default="", metavar="COLUMNS",
                         help="comma-separated input columns (an id, the label) copied first into each output row")
    predict.add_argument("--max-bad-records", type=int, default=0, metavar="N",
                         help="skip up to N rows the model cannot take (a field missing, a value not of its input's "
                              "dtype), each logged with its line; one more fails (default 0)")

    inspect = command("inspect", help="checkpoints, last metrics and exports of a model_dir")
    inspect.add_argument("model_dir", help="the job's model_dir (where its checkpoints are)")

    report = command("report", help="write a PNG of training loss and eval metrics over steps")
    report.add_argument("model_dir", help="the job's model_dir (its event files are read)")
    report.add_argument("--output", help="PNG path (default: <model_dir>/report.png)")
    service = command("shard-service", help="run a job's shard service on its own (not in the chief)")
    service.add_argument("--model-dir", required=True, help="the job's model_dir (seals live in <model_dir>/shards)")
    service.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    service.add_argument("--port", type=int, default=0, help="port (default: any free one, printed)")
    service.add_argument("--worker-timeout-secs", type=float, default=30.0,
                         help="heartbeat silence after which a worker's shards go back to the queue (default 30)")
    service.add_argument("--report-port", default="0",
                         help="port of the report line, the workers' per-step reports on the same host (default: any "
                              "free one, told to the workers; 'off': reports over gRPC)")

    launch = command("launch", help="run a conf's job as ps, chief, workers and evaluator processes here")
    launch.add_argument("conf", help="conf as package.module.Class, path/to/conf.py or path/to/conf.py:Class")
    launch.add_argument("--ps", type=int, help="parameter servers (default 1; none for a synchronous conf)")
    launch.add_argument("--workers", type=int, default=1, help="workers besides the chief (default 1)")
    launch.add_argument("--max-workers", type=int, help="worker slots to scale up to (default: --workers)")
    launch.add_argument("--evaluator", action="store_true", help="also run an evaluator process")
    launch.add_argument("--model-dir", help="override the conf's model_dir")
    launch.add_argument("--max-steps", type=int, help="override the conf's max_steps")
    launch.add_argument("--max-restarts", type=int, default=3,
                        help="restarts of a process (or of a synchronous group) in a row with no progress between "
                             "them before giving up (default 3); a checkpoint newer than the one it restarted from "
                             "gives the budget back, so a crash loop ends the job and a long job's faults do not "
                             "add up")
    launch.add_argument("--stall-secs", type=float, default=30.0,
                        help="a synchronous job: a trainer that makes no step for this long restarts the group from "
                             "the newest checkpoint (default 30)")
    launch.add_argument("--base-port", type=int, help="use consecutive ports from here (default: any free ports)")
    launch.add_argument("--autoscale", action="store_true",
                        help="add or remove workers (up to --max-workers) from measured steps/s and ps CPU")
    launch.add_argument("--network", choices=("auto", "private", "host"), default="auto",
                        help="auto (default): run the processes in a loopback-only network namespace where this "
                             "machine allows it, so their TensorFlow servers cannot be reached from other hosts; "
                             "private: that or an error; host: the machine's network (a job that reads data from "
                             "other hosts), servers on every interface")

    check = command("check", help="list a source tree's uses of tf.estimator and whether elastimator serves each")
    check.add_argument("paths", nargs="+", metavar="PATH",
                       help="a source tree, a .py file, or an installed package's name (read, never imported)")
    check.add_argument("--unserved", action="store_true", help="list only the uses elastimator does not serve")
    check.add_argument("--by-name", action="store_true",
                       help="one line per name used, with how many of the PATHs use it, most used first")

    scale = command("scale", help="change the number of workers of a job `launch` is running")
    scale.add_argument("model_dir", help="the model_dir the running `launch` was given")
    scale.add_argument("--workers", type=int, required=True,
                       help="workers to run from now on (0 to --max-workers of the launch)")

    k8s = command("k8s", help="Kubernetes jobs (a Kubeflow TFJob or a JobSet): write, convert, validate, submit, "
                              "scale")
    k8s_commands = k8s.add_subparsers(dest="k8s_command", required=True, metavar="K8S_COMMAND")
    manifest = k8s_commands.add_parser("manifest", help="write the TFJob or JobSet (and its token Secret) for a "
                                                        "conf")
    manifest.add_argument("conf", help="the conf as the container sees it, e.g. examples/census/census_conf.py")
    manifest.add_argument("--image", required=True, help="container image with elastimator and the conf")
    manifest.add_argument("--name", help="job name (default: from the conf's file name)")
    manifest.add_argument("--namespace", default="default")
    manifest.add_argument("--ps", type=int,
                          help="parameter servers (default: 1, or none where the conf's strategy is "
                               "multi_worker_mirrored)")
    manifest.add_argument("--workers", type=int, default=1)
    manifest.add_argument("--max-workers", type=int, help="worker slots scaling may use (default: --workers)")
    manifest.add_argument("--evaluator", action="store_true")
    manifest.add_argument("--autoscale", action="store_true",
                          help="the chief scales the workers within --max-workers, with the launcher's policy")
    manifest.add_argument("--model-dir", default="/mnt/model", help="model_dir inside the pods (shared storage)")
    manifest.add_argument("--pvc", help="PersistentVolumeClaim mounted at --model-dir (ReadWriteMany); a job of "
                                        "several pods needs it, unless --model-dir has a scheme (gs://...)")
    manifest.add_argument("--max-restarts", type=int, default=3,
                          help="restarts of a pod's task with no progress between them before the job fails "
                               "(default 3): each pod counts its starts in the model_dir, a newer checkpoint gives "
                               "the budget back, and the restart policies fail the job on the exit that says so")
    manifest.add_argument("--cpu", default="2", help="CPU request of each pod")
    manifest.add_argument("--memory", default="4Gi", help="memory request of each pod")
    manifest.add_argument("--api", choices=("tfjob", "jobset"), default="tfjob",
                          help="tfjob: a Kubeflow TFJob (needs the training operator); jobset: a JobSet "
                               "(jobset.x-k8s.io, needs only the JobSet controller)")
    manifest.add_argument("--output", "-o", help="file to write (default: standard output)")
    convert = k8s_commands.add_parser("convert", help="a DLRover ElasticJob YAML as elastimator's manifest")
    convert.add_argument("elastic_job", help="the ElasticJob file (elastic.iml.github.io/v1alpha1)")
    convert.add_argument("--api", choices=("tfjob", "jobset"), default="tfjob", help="what to write (default tfjob)")
    convert.add_argument("--output", "-o", help="file to write (default: standard output)")
    validate = k8s_commands.add_parser("validate", help="check a manifest against the TFJob or JobSet schema and "
                                                        "core/v1")
    validate.add_argument("manifest", help="a manifest file (e.g. one `elastimator k8s manifest` wrote)")
    submit = k8s_commands.add_parser("submit", help="create the manifest's objects with the kubernetes client")
    submit.add_argument("manifest", help="a file `elastimator k8s manifest` wrote")
    k8s_scale = k8s_commands.add_parser("scale", help="change a submitted job's workers (a TFJob's Worker replicas, "
                                                      "a JobSet's worker job)")
    k8s_scale.add_argument("name", help="the TFJob's or JobSet's name")
    k8s_scale.add_argument("--workers", type=int, required=True, help="Worker replicas from now on")
    k8s_scale.add_argument("--namespace", default="default")
    k8s_scale.add_argument("--api", choices=("tfjob", "jobset"), default="tfjob",
                           help="what the job was submitted as (default tfjob)")
    rehearse = k8s_commands.add_parser("rehearse", help="run a TFJob or JobSet manifest on this machine as "
                                                        "Kubernetes would (a network namespace per pod), before "
                                                        "you submit it")
    rehearse.add_argument("manifest", help="a manifest file (`k8s manifest` or `k8s convert` wrote it)")
    rehearse.add_argument("--timeout", type=float, help="fail the rehearsal after this many seconds")
    rehearse.add_argument("--image-root", default=".",
                          help="the image's code, mounted at /job as the Dockerfile in docs/kubernetes.md puts it "
                               "(default: the current directory)")
    rehearse.add_argument("--work-dir", help="logs, claims and the pods' own disks (default: ./rehearsal-<job>)")
    rehearse.add_argument("--claim", action="append", default=[], metavar="NAME=DIR",
                          help="the directory of a PersistentVolumeClaim (default: <work-dir>/claims/NAME)")
    return parser


def _count_the_start(model_dir: str) -> None:
    """In a pod whose manifest sets a restart budget, this start counts against it (cluster/pod_budget.py)."""
    from elastimator.cluster import pod_budget
    from elastimator.estimator.saving.checkpoints import CheckpointDir

    budget = pod_budget.max_strikes(os.environ)
    task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task") or {}
    if budget is None or not task.get("type"):
        return
    newest = CheckpointDir(model_dir).newest_saved_step()
    pod_budget.record_start(model_dir, f"{task['type']}-{task.get('index', 0)}", newest, budget)


def _run(args) -> int:
    from elastimator.estimator import LOCAL_JOB_TF_CONFIG
    from elastimator.job import data_quality
    from elastimator.job.conf import load_conf
    from elastimator.job.executor import run_job
    from elastimator.job.inspect_dir import inspect_model_dir, metrics_rows, table, why_no_export

    from elastimator.cluster.jobset import export_tf_config

    export_tf_config()  # a JobSet's pod derives its own, as it starts
    os.environ.setdefault("TF_CONFIG", json.dumps(LOCAL_JOB_TF_CONFIG))  # the conf's code may read it (DLRover's did)
    if args.model_dir is not None:  # as in a pod: counted before the conf is read, whose import may be what fails
        _count_the_start(args.model_dir)
    conf = load_conf(args.conf)
    overrides = {k: v for k, v in (("model_dir", args.model_dir), ("max_steps", args.max_steps)) if v is not None}
    conf = dataclasses.replace(conf, **overrides)
    if args.model_dir is None:
        _count_the_start(conf.model_dir)
    result = run_job(conf, show_progress=not args.no_progress)
    if args.no_summary:
        return 0
    rows = [("model_dir", result.model_dir), ("global step", str(result.global_step))]
    rows += metrics_rows(result.metrics or {})
    # What this run exported, or (a resumed run with nothing left to train) the newest export of each exporter.
    exports = result.exports or [paths[-1] for paths in inspect_model_dir(result.model_dir).exports.values()]
    rows += [("export", path) for path in exports] or [("export", why_no_export(inspect_model_dir(result.model_dir)))]
    rows += data_quality.rows(result.data_sets)
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
    from elastimator.job.output_file import replace_on_success

    if args.batch_size <= 0:
        raise ConfError(f"--batch-size must be > 0; got {args.batch_size}.")
    if args.max_bad_records < 0:
        raise ConfError(f"--max-bad-records must be 0 or more; got {args.max_bad_records}.")
    # --output is replaced only once every row is written: a bad model path or input leaves it as it was.
    with replace_on_success(args.output, newline="") if args.output else contextlib.nullcontext() as output:
        keep = [name for name in args.keep_columns.split(",") if name]
        delim = "\t" if args.field_delim == "\\t" else args.field_delim
        done = predict_file(args.saved_model, args.input, output, args.batch_size, delim, args.signature, keep,
                            args.max_bad_records)
    skipped = ""
    if done.bad_rows:
        lines = ", ".join(where.split(": ")[0].rpartition(":")[2] for where in done.bad_rows)
        skipped = f"; skipped {len(done.bad_rows)} bad row(s) of --input, at line(s) {lines} (listed above)"
    logging.getLogger("elastimator").info("Wrote predictions for %d row(s)%s%s.", done.rows,
                                          f" to {args.output}" if args.output else "", skipped)
    return 0


def _inspect(args) -> int:
    from elastimator.job.inspect_dir import inspect_model_dir, render

    print(render(inspect_model_dir(args.model_dir)))
    return 0


def _report(args) -> int:
    from elastimator.job.metrics_chart import write_chart

    print(write_chart(args.model_dir, args.output))
    return 0


def _shard_service(args) -> int:
    import signal

    from elastimator.elastic.service_config import ServiceConfig, report_port_from
    from elastimator.elastic.service import serve

    # Held back before the service starts its threads (which inherit the mask), then waited for: a stop that
    # comes at any moment, even before the address is printed, is kept until sigwait takes it. (An Event set
    # from a handler could deadlock: the handler runs in the main thread, which may hold that Event's lock.)
    stops = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    server = serve(args.model_dir, ServiceConfig.token_from_env(), args.host, args.port, args.worker_timeout_secs,
                   report_port=report_port_from(args.report_port))
    print(server.address, flush=True)
    signal.sigwait(stops)
    server.stop()
    return 0


_IN_USER_NAMESPACE = "ELASTIMATOR_LAUNCH_IN_USER_NAMESPACE"


def _as_root_of_a_user_namespace() -> None:
    """For a user without CAP_SYS_ADMIN: runs `launch` again as root of a user namespace of its own (files it
    writes stay the user's), where it may make the job's private network. Returns where that is not possible."""
    import shutil
    import subprocess

    if os.geteuid() == 0 or os.environ.get(_IN_USER_NAMESPACE) or shutil.which("unshare") is None:
        return
    command = ["unshare", "--user", "--map-root-user"]
    if subprocess.run([*command, "true"], capture_output=True).returncode != 0:
        return  # user namespaces are disabled here; the launcher says what that means
    os.environ[_IN_USER_NAMESPACE] = "1"
    os.execvp("unshare", [*command, sys.executable, "-m", "elastimator.cli", *sys.argv[1:]])


@contextlib.contextmanager
def _tf_config_if_unset(tf_config: dict):
    """TF_CONFIG is `tf_config` while open, unless it was set already."""
    if "TF_CONFIG" in os.environ:
        yield
        return
    os.environ["TF_CONFIG"] = json.dumps(tf_config)
    try:
        yield
    finally:
        os.environ.pop("TF_CONFIG", None)


def _launch(args) -> int:
    import signal

    if args.network != "host":
        _as_root_of_a_user_namespace()
    from elastimator.cluster import autoscale
    from elastimator.cluster.launcher import Launcher, LaunchSpec
    from elastimator.job.conf import load_conf
    from elastimator.job.inspect_dir import inspect_model_dir, job_rows, table

    # A conf that fails to import is reported here, once, not by every process. Its code may read TF_CONFIG as it
    # is imported (DLRover's criteo_deeprec model does): it sees the job's shape, as the chief, ports not yet chosen.
    shape = {"chief": ["localhost:0"], "ps": ["localhost:0"] * (args.ps or 1), "worker": ["localhost:0"] * args.workers}
    with _tf_config_if_unset({"cluster": shape, "task": {"type": "chief", "index": 0}}):
        conf = load_conf(args.conf)
    synchronous = conf.strategy == "multi_worker_mirrored"
    if conf.strategy == "mirrored":
        raise ConfError(f"conf {conf.name}: strategy 'mirrored' trains in one process; run it with `elastimator run`, "
                        "or set strategy 'multi_worker_mirrored' (synchronous) or 'parameter_server' to launch a "
                        "cluster.")
    model_dir = args.model_dir or conf.model_dir
    if not model_dir:
        raise ConfError("launch needs a model_dir that every process shares: set it in the conf or pass "
                        "--model-dir.")
    spec = LaunchSpec(args.conf, os.path.abspath(model_dir), ps=args.ps, workers=args.workers,
                      max_workers=args.max_workers, evaluator=args.evaluator, max_steps=args.max_steps,
                      max_restarts=args.max_restarts, base_port=args.base_port, network=args.network,
                      stall_secs=args.stall_secs,
                      synchronous=synchronous)
    if args.autoscale:
        spec = dataclasses.replace(spec, autoscale=autoscale.ScalingLimits(max_workers=spec.worker_slots))
    launcher = Launcher(spec)
    for sig in (signal.SIGTERM, signal.SIGINT):  # SIGINT too: a shell may have started us with it ignored
        signal.signal(sig, lambda *_: launcher.request_stop())
    started = time.monotonic()
    code = launcher.run()
    outcome = {0: "finished", 130: "was stopped"}.get(code, "failed")
    rows = job_rows(inspect_model_dir(spec.model_dir)) + [("wall time", f"{time.monotonic() - started:.0f} s")]
    restarts = launcher.restarts()
    if restarts:
        rows.append(("restarts", ", ".join(f"{task}: {count}" for task, count in sorted(restarts.items()))))
    print(f"\njob {conf.name} {outcome} (exit code {code})\n" + table(rows))
    return code


def _scale(args) -> int:
    from elastimator.cluster.launcher import request_scale

    request_scale(args.model_dir, args.workers)
    print(f"asked the launcher of {args.model_dir} for {args.workers} worker(s)")
    return 0


def _manifest_ps(args) -> int:
    """The manifest's parameter servers: as the conf's strategy says (read from its source where it is here),
    --ps only where it agrees."""
    from elastimator.job.conf_source import UNREADABLE, declared_strategy

    strategy = declared_strategy(args.conf)
    if strategy == "mirrored":
        raise ConfError(f"conf {args.conf}: strategy 'mirrored' trains in one process; a Kubernetes job needs "
                        "'multi_worker_mirrored' (synchronous) or 'parameter_server'.")
    if strategy == "multi_worker_mirrored":
        if args.ps:
            raise ConfError(f"--ps {args.ps} contradicts conf {args.conf}, whose strategy 'multi_worker_mirrored' "
                            "trains without parameter servers. Drop --ps, or set the conf's strategy to "
                            "'parameter_server'.")
        return 0
    if strategy == UNREADABLE:
        print(f"elastimator: conf {args.conf} is not readable here, so its strategy is not checked; --ps decides "
              f"(default 1).", file=sys.stderr)
    elif args.ps == 0:
        raise ConfError(f"--ps 0 makes a synchronous job, but conf {args.conf} trains with parameter servers "
                        f"(strategy {strategy or 'parameter_server, the default'!r}). Set strategy = "
                        "\"multi_worker_mirrored\" in the conf, or give --ps 1 or more.")
    return 1 if args.ps is None else args.ps


def _k8s(args) -> int:
    from elastimator.cluster import k8s, manifests

    if args.k8s_command == "manifest":
        args.ps = _manifest_ps(args)
        spec = k8s.TFJobSpec.from_args(args)
        if args.api == "jobset":
            from elastimator.cluster import jobset

            documents = jobset.manifest(spec)
        else:
            documents = k8s.manifest(spec)
        from elastimator.cluster import shared_storage

        unshared = shared_storage.problems(documents)
        if unshared:
            raise ConfError(unshared[0])
        text = k8s.render(documents)
        if args.output:
            from elastimator.job.output_file import replace_on_success

            with replace_on_success(args.output) as f:
                f.write(text)
            kinds = [d.get("kind", "?") for d in k8s.load_text(text)]
            print(f"wrote {args.output}: {', '.join(kinds)} for job {spec.name}; check it with `elastimator k8s "
                  f"validate {args.output}`, create it with `elastimator k8s submit {args.output}`")
        else:
            sys.stdout.write(text)
        return 0
    if args.k8s_command == "convert":
        from elastimator.cluster import elastic_job

        from elastimator.cluster import shared_storage

        conversion = elastic_job.convert(k8s.load(args.elastic_job)[0], args.api)
        manifests.check(conversion.documents, shared=False)
        for note in conversion.notes:
            print(f"note: {note}", file=sys.stderr)
        for problem in shared_storage.problems(conversion.documents):  # the ElasticJob's volumes may be elsewhere
            print(f"WARNING: {problem} (`elastimator k8s validate` refuses the manifest until it does.)",
                  file=sys.stderr)
        text = k8s.render(conversion.documents)
        if not args.output:
            sys.stdout.write(text)
            return 0
        from elastimator.job.output_file import replace_on_success

        with replace_on_success(args.output) as f:
            f.write(text)
        print(f"wrote {args.output}: {', '.join(d['kind'] for d in conversion.documents)} from {args.elastic_job} "
              f"({len(conversion.notes)} note(s) above); create it with `elastimator k8s submit {args.output}`")
        return 0
    if args.k8s_command == "validate":
        documents = k8s.load(args.manifest)
        manifests.check(documents)
        print(f"{args.manifest}: valid ({', '.join(d.get('kind', '?') for d in documents)})")
        return 0
    if args.k8s_command == "rehearse":
        from elastimator.cluster.rehearsal import RehearsalSpec, rehearse

        claims = dict(c.partition("=")[::2] for c in args.claim)
        if any(not name or not path for name, path in claims.items()):
            raise ConfError(f"--claim takes NAME=DIR; got {args.claim}.")
        return rehearse(RehearsalSpec(args.manifest, image_root=args.image_root, work_dir=args.work_dir or "",
                                      timeout_secs=args.timeout, claims=claims))
    if args.k8s_command == "submit":
        for created in manifests.submit(k8s.load(args.manifest)):
            print(f"created {created}")
        return 0
    if args.api == "jobset":
        from elastimator.cluster import jobset

        print(jobset.scale(args.name, args.workers, args.namespace, k8s.connect()))
    else:
        print(k8s.scale(args.name, args.workers, args.namespace))
    return 0


def _progress_line(stream=None):
    """On a terminal, a line that says how many files `check` has read (rewritten in place, cleared at the end);
    elsewhere nothing."""
    stream = stream or sys.stderr
    if not stream.isatty():
        return None
    last = [0.0]

    def show(done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - last[0] >= 0.1:
            last[0] = now
            stream.write(f"\rchecking: {done:,} of {total:,} files read")
            if done == total:
                stream.write("\r\033[K")
            stream.flush()

    return show


def _check(args) -> int:
    from elastimator.migrate import check

    progress = _progress_line()
    if args.by_name:
        uses, project_of, read = [], {}, 0
        for path in args.paths:
            checked = check.check_sources([path], progress)
            project_of.update((use.path, path) for use in checked.uses)
            uses += checked.uses
            read += checked.files_read
        for name, kind, served, projects in check.by_name(uses, project_of.get):
            if served and args.unserved:
                continue
            print(f"{len(projects):4d}  {name} ({kind}){'' if served else ': not served'}")
        print(f"{len(uses)} uses in {len({use.path for use in uses})} files (of {read:,} read)")
    else:
        checked = check.check_sources(args.paths, progress)
        uses = checked.uses
        for line in check.report(uses, show_served=not args.unserved, files_read=checked.files_read):
            print(line)
    return 0 if not any(use.missing for use in uses) else 1


COMMANDS = {"run": _run, "export": _export, "predict": _predict, "inspect": _inspect, "report": _report,
            "shard-service": _shard_service, "launch": _launch, "scale": _scale, "k8s": _k8s,
            "check": _check}


_WITHOUT_TENSORFLOW = {"scale", "k8s", "check", "shard-service"}
"""Commands that never load TensorFlow (the shard service holds a book of integers: elastic/model_dir_files.py)."""


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    code = _main(parser, args)
    if args.command == "run" and code == 1 and os.environ.get(POD_BUDGET_ENV):
        # In a pod with a restart budget a failure a restart may cure says so (errors.RETRY_EXIT): its restart
        # policy fails the job on 1-127 (cluster/k8s.py), and the budget ends a crash loop instead.
        return RETRY_EXIT
    return code


def _main(parser, args) -> int:
    if args.command is None:  # `elastimator` alone: what it can do
        parser.print_help(sys.stderr)
        return USAGE_EXIT
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    try:
        _check_paths(args)  # a mistyped path is answered before TensorFlow loads (seconds)
        if args.command not in _WITHOUT_TENSORFLOW:
            from elastimator.tensorflow_import import import_quietly

            import_quietly(args.verbose)
        return COMMANDS[args.command](args)
    except USAGE_ERRORS as e:
        _traceback_if_asked(args)
        return _fail(f"error: {e}", USAGE_EXIT)
    except OutOfRestarts as e:
        return _fail(f"error: {e}", OUT_OF_RESTARTS_EXIT)
    except ElastimatorError as e:
        _traceback_if_asked(args)
        where = _where(e.__cause__) if e.__cause__ is not None else ""  # the user's line that raised, if any
        return _fail(f"error: {e}{where}", REPEATING_EXIT if _repeats(e) and args.command == "run" else 1)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as e:  # pylint: disable=broad-except
        # Not one of ours: a missing TensorFlow, a kubeconfig the client cannot read, a bug. One line names it;
        # the traceback is there for whoever asks.
        if args.verbose or os.environ.get(TRACEBACKS_ENV):
            _traceback_if_asked(args)
            return _fail(f"error: {type(e).__name__}: {e}{_where(e)}", 1)
        return _fail(f"error: {type(e).__name__}: {e}{_where(e)} (--verbose shows the traceback)", 1)


def _traceback_if_asked(args) -> None:
    """With --verbose (or ELASTIMATOR_TRACEBACKS), the traceback of the error being handled, before its line."""
    if getattr(args, "verbose", False) or os.environ.get(TRACEBACKS_ENV):
        traceback.print_exc()


def _check_paths(args) -> None:
    """The paths the command names that must exist already; MissingPathError (exit 2) for one that does not."""
    cwd = os.getcwd()
    conf = getattr(args, "conf", None)
    if args.command in ("run", "export", "launch") and conf:
        path = conf.partition(":")[0]
        if path.endswith(".py") and not os.path.isfile(path):
            raise MissingPathError(f"conf file {path!r} does not exist (current directory: {cwd}).")
        from elastimator.job.conf_source import missing_conf_class

        missing = missing_conf_class(conf)  # read from the source: a misspelt class is answered before TensorFlow
        if missing is not None:
            raise ConfError(missing)
    if args.command in ("inspect", "report") and not os.path.isdir(args.model_dir):
        raise MissingPathError(f"model_dir {args.model_dir!r} does not exist (current directory: {cwd}).")
    elastic_job = getattr(args, "elastic_job", None)
    if elastic_job is not None and not os.path.isfile(elastic_job):
        raise MissingPathError(f"ElasticJob file {elastic_job!r} does not exist (current directory: {cwd}).")
    if args.command == "predict":
        if not os.path.exists(args.saved_model):
            raise MissingPathError(f"--saved-model {args.saved_model!r} does not exist (current directory: {cwd}).")
        if not os.path.isfile(args.input):
            raise MissingPathError(f"--input {args.input!r} does not exist (current directory: {cwd}).")


def _fail(message: str, code: int) -> int:
    print(f"elastimator: {message}", file=sys.stderr)
    return code


def _where(error: BaseException) -> str:
    """' at FILE:LINE in FUNCTION' of the innermost frame in the user's own code (a model_fn, a conf), if any."""
    import sysconfig

    library = [os.path.dirname(os.path.abspath(__file__))]
    library += [sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")]
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not any(os.path.abspath(f.filename).startswith(prefix + os.sep) for prefix in library)]
    return f" at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""


if __name__ == "__main__":
    sys.exit(main())
