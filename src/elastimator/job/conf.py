"""Job confs: a plain Python class or module that declares a whole training job.

`load_conf("pkg.module.Class")`, `load_conf("path/to/conf.py")` or
`load_conf("path/to/conf.py:Class")` imports it (with `tf.estimator` and DLRover's
trainer paths resolvable, so DLRover confs import unedited); `JobConf.from_object`
checks it as a whole — wrong types, inconsistent settings, misspelled keys — before
anything runs. Other keys (column lists, feature names, model hyperparameters) are
the user's own: they are listed once in the log and left alone.
docs/conf-reference.md documents every key.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import logging
import os
import sys
import types
from typing import Any, Callable, Mapping

from elastimator._validate import is_int
from elastimator.data.dataset import DataSetSpec
from elastimator.data.file_reader import FileReader
from elastimator.errors import ConfError, ConfigError, ElastimatorError
from elastimator.estimator import Estimator
from elastimator.train_eval.exporters import BestExporter, Exporter, FinalExporter, LatestExporter, loss_smaller

logger = logging.getLogger("elastimator")

_EXPORTER_TYPES = ("final", "latest", "best")
DATASET_KEYS = {
    "reader": "a FileReader, ElasticReader or iterator reader",
    "path": "shorthand for reader=FileReader(path)",
    "columns": "a list of Column",
    "batch_size": "int > 0",
    "epoch": "int > 0 or None",
    "field_delim": "one character",
    "shuffle": "bool",
    "shuffle_buffer_size": "int > 0",
    "max_bad_records": "int >= 0",
    "skip_header": "bool, or None to detect a header line (with 'path')",
    "shard_size": "int > 0 or None",
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExporterConf:
    """Which SavedModels the job writes to <model_dir>/export/<name>/."""

    type: str = "final"
    """"final" (once, at the end), "latest" (after each evaluation) or "best" (when the metric improves)."""
    name: str | None = None
    """Directory name under export/ (default: the type)."""
    exports_to_keep: int | None = 5
    """How many exports "latest" and "best" keep."""
    compare_fn: Callable = loss_smaller
    """For "best": compare_fn(best_eval_result, current_eval_result) -> True when current is better."""

    def build(self, serving_input_receiver_fn) -> Exporter:
        name = self.name or self.type
        if self.type == "final":
            return FinalExporter(name, serving_input_receiver_fn)
        if self.type == "latest":
            return LatestExporter(name, serving_input_receiver_fn, exports_to_keep=self.exports_to_keep)
        return BestExporter(name, serving_input_receiver_fn, compare_fn=self.compare_fn,
                            exports_to_keep=self.exports_to_keep)


STRATEGIES = ("parameter_server", "mirrored", "multi_worker_mirrored")
"""The conf's `strategy` values."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class JobConf:
    """A validated job conf. Build it with `JobConf.from_object(conf_class_or_module)`."""

    classifier_class: Any
    """A model_fn, or an Estimator subclass that defines model_fn(self, features, labels, mode, params)."""
    train_set: DataSetSpec
    """Training data: reader, columns and batching."""
    eval_set: DataSetSpec | None = None
    """Evaluation data; without it the job trains and exports without evaluating."""
    model_dir: str | None = None
    """Where checkpoints, events and exports go (a temporary directory when unset)."""
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Hyperparameters passed to model_fn."""
    batch_size: int | None = None
    """Default batch size for data sets that do not set one (else 128)."""
    epoch: int | None = 1
    """Default passes over train_set when it does not set its own 'epoch' (None: repeat until max_steps)."""
    max_steps: int | None = None
    """Stop training at this global step (None: when the training data ends)."""
    save_steps: int | None = None
    """Checkpoint every N steps (exclusive with save_secs)."""
    save_secs: int | None = None
    """Checkpoint every N seconds (600 when neither is set)."""
    keep_checkpoint_max: int = 5
    """Newest checkpoints to keep."""
    log_steps: int = 100
    """Log (and update the progress bar) every N steps."""
    summary_steps: int | None = None
    """Write the training loss and summaries (TensorBoard, `elastimator report`) every N steps (None: every
    log_steps or 20 steps, whichever is more often)."""
    steps_per_execution: int | None = None
    """Training steps per session call (RunConfig.steps_per_execution); hooks and progress run between calls.
    None: sized automatically (up to 20 alone; 1 in a cluster or with elastic sharding)."""
    eval_steps: int | None = None
    """Batches per evaluation (None: the whole eval set)."""
    eval_every_steps: int | None = None
    """Evaluate when this many steps passed since the last evaluation (at checkpoints)."""
    eval_throttle_secs: int = 0
    """At least this many seconds between evaluations (0: after every checkpoint)."""
    eval_start_delay_secs: int = 0
    """A distributed evaluator waits this long before its first evaluation."""
    exporter: ExporterConf = dataclasses.field(default_factory=ExporterConf)
    """"final", "latest", "best", a dict of ExporterConf fields, or an Exporter."""
    tf_random_seed: int | None = None
    """Seed for the graph and Keras initializers."""
    strategy: str = "parameter_server"
    """How the job trains on several devices: "parameter_server" (one replica per process; a cluster shares
    variables on parameter servers), "mirrored" (one process, a replica on every local GPU, or the CPU; the
    data sets' batch size is per replica) or "multi_worker_mirrored" (synchronous: the chief and every worker
    train a replica each and all-reduce their gradients; no parameter servers)."""
    replicas_per_worker: int | None = None
    """For "mirrored" and "multi_worker_mirrored": how many replicas each process trains (None: one per local GPU,
    or one on the CPU; N: its first N GPUs, or N logical devices of its CPU where it has none; job/devices.py)."""
    name: str = "job"
    """The conf's name (set by load_conf)."""
    user_keys: tuple[str, ...] = ()
    """The conf's other keys (columns, feature lists, hyperparameters): the user's, not elastimator's."""

    @classmethod
    def from_object(cls, conf: Any, name: str | None = None) -> "JobConf":
        """Validates a conf class, module, instance or dict as a whole.

        Raises:
            ConfError: naming the key, what it expected and what it got.
        """
        raw = _settings(conf)
        known = {f.name for f in dataclasses.fields(cls) if f.name not in ("name", "user_keys")}
        user_keys = _user_keys("conf", raw, known)
        raw = {k: v for k, v in raw.items() if k not in user_keys}
        for key in ("classifier_class", "train_set"):
            if key not in raw:
                raise ConfError(f"conf: {key!r} is required.")
        _check_classifier(raw["classifier_class"])
        for key in ("batch_size", "epoch", "max_steps", "save_steps", "save_secs", "eval_steps", "eval_every_steps",
                    "summary_steps", "tf_random_seed", "replicas_per_worker"):
            _check_int(key, raw.get(key), allow_none=True, minimum=0 if key == "tf_random_seed" else 1)
        for key in ("keep_checkpoint_max", "log_steps", "steps_per_execution", "eval_throttle_secs",
                    "eval_start_delay_secs"):
            if key in raw:
                _check_int(key, raw[key], allow_none=key == "steps_per_execution",
                           minimum=1 if key in ("log_steps", "steps_per_execution") else 0)
        if raw.get("save_steps") and raw.get("save_secs"):
            raise ConfError(f"conf: save_steps ({raw['save_steps']}) and save_secs ({raw['save_secs']}) are "
                            "exclusive; set one.")
        if "model_dir" in raw and raw["model_dir"] is not None and not isinstance(raw["model_dir"], (str, os.PathLike)):
            raise ConfError(f"conf: 'model_dir' expected a path string; got {raw['model_dir']!r}. Set it as a "
                            "string, e.g. model_dir = \"model\", or pass --model-dir.")
        if raw.get("strategy", "parameter_server") not in STRATEGIES:
            raise ConfError(f"conf: 'strategy' expected one of {list(STRATEGIES)}; got {raw['strategy']!r}.")
        if raw.get("replicas_per_worker") is not None and raw.get("strategy", "parameter_server") == "parameter_server":
            raise ConfError(f"conf: 'replicas_per_worker' is {raw['replicas_per_worker']}, and strategy "
                            "'parameter_server' trains one replica per process. Set strategy 'mirrored' or "
                            "'multi_worker_mirrored', or leave 'replicas_per_worker' out.")
        if "params" in raw and not isinstance(raw["params"], Mapping):
            raise ConfError(f"conf: 'params' expected a dict; got {type(raw['params']).__name__}. Set it as a "
                            "dict of hyperparameters, e.g. params = {\"learning_rate\": 0.01}.")
        batch_size = raw.get("batch_size")
        values = dict(raw)
        values["train_set"] = _dataset("train_set", raw["train_set"], batch_size, need_label=True,
                                       epoch=raw.get("epoch", 1))
        if raw.get("eval_set") is not None:
            # Evaluation reads its set once unless the set says otherwise; the top-level epoch is for training.
            values["eval_set"] = _dataset("eval_set", raw["eval_set"], batch_size, need_label=True, epoch=1)
            _check_same_features(values["train_set"], values["eval_set"])
        if "exporter" in raw:
            values["exporter"] = _exporter(raw["exporter"])
        if values.get("model_dir") is not None:
            values["model_dir"] = os.fspath(values["model_dir"])
        values["params"] = dict(raw.get("params") or {})
        return cls(name=name or getattr(conf, "__name__", "job"), user_keys=tuple(sorted(user_keys)), **values)


def _edit_distance(a: str, b: str) -> int:
    """Edits (insert, delete, substitute, swap two neighbours) that turn a into b."""
    previous2, previous = None, list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], previous2[j - 2] + 1)
        previous2, previous = previous, current
    return previous[-1]


def near_miss(key: str, known) -> str | None:
    """The known key `key` looks like a misspelling of (one or two edits away, ignoring case), or None."""
    folded = key.lower().replace("-", "_")
    best = None
    for candidate in sorted(known):
        distance = _edit_distance(folded, candidate)
        allowed = 1 if len(candidate) <= 5 else 2
        if distance <= allowed and (best is None or distance < best[0]):
            best = (distance, candidate)
    return best[1] if best else None


def _user_keys(where: str, raw: Mapping[str, Any], known) -> set[str]:
    """The keys of `raw` that are the user's own; a key that looks like a misspelled known key is an error."""
    unknown = sorted(set(raw) - set(known))
    misspelled = [(key, near_miss(key, known)) for key in unknown]
    misspelled = [(key, close) for key, close in misspelled if close is not None]
    if misspelled:
        hints = ", ".join(f"{key!r} (did you mean {close!r}?)" for key, close in misspelled)
        raise ConfError(f"{where}: unknown key(s) {hints}. Rename it to the known key, or give your own key a "
                        f"name further from elastimator's. Known keys: {', '.join(sorted(known))}.")
    if unknown:
        logger.info("%s: keys elastimator does not use, left to your code: %s.", where, ", ".join(unknown))
    return set(unknown)


def _settings(conf: Any) -> dict[str, Any]:
    """A conf's settings: public attributes that are not imports, functions or classes (unless known keys)."""
    if isinstance(conf, Mapping):
        return dict(conf)
    if isinstance(conf, types.ModuleType):
        items = vars(conf).items()
    elif inspect.isclass(conf):
        items = ((k, v) for klass in reversed(conf.__mro__[:-1]) for k, v in vars(klass).items())
    else:
        items = ((k, getattr(conf, k)) for k in dir(conf))
    settings = {}
    for key, value in items:
        if key.startswith("_"):
            continue
        if key in ("classifier_class", "exporter"):
            settings[key] = value
        elif isinstance(value, types.ModuleType) or inspect.isclass(value) or inspect.isroutine(value) \
                or isinstance(value, (classmethod, staticmethod, property)):
            continue
        else:
            settings[key] = value
    return settings


def _check_int(key: str, value, allow_none: bool, minimum: int) -> None:
    if value is None and allow_none:
        return
    if not is_int(value, minimum=minimum):
        expected = f"int >= {minimum}" + (" or None" if allow_none else "")
        example = max(minimum, 1000 if "steps" in key else 1)
        raise ConfError(f"conf: {key!r} expected {expected}; got {type(value).__name__} {value!r}. Set it as a "
                        f"plain int in the conf, e.g. {key} = {example}" + (" (or None)." if allow_none else "."))


def _check_classifier(value) -> None:
    """A model_fn, or any Estimator subclass (its model_fn is checked when it is constructed)."""
    if inspect.isclass(value):
        if not issubclass(value, Estimator):
            raise ConfError(
                f"conf: 'classifier_class' is the class {value.__name__}, which is not an elastimator.Estimator "
                "(tf.estimator.Estimator) subclass. Subclass it and define model_fn(self, features, labels, mode, "
                "params) or pass a model_fn to its __init__, or set classifier_class to a model_fn function."
            )
        return
    if not callable(value):
        raise ConfError(f"conf: 'classifier_class' expected a model_fn or an Estimator subclass; got {value!r}.")


def _dataset(key: str, value, batch_size: int | None, need_label: bool, epoch: int | None) -> DataSetSpec:
    """The typed data set; its own keys win over the conf's top-level `batch_size` and `epoch`."""
    if isinstance(value, DataSetSpec):
        return value
    if not isinstance(value, Mapping):
        raise ConfError(f"conf: {key!r} expected a dict with 'reader' and 'columns'; got {type(value).__name__}.")
    user_keys = _user_keys(f"conf: {key}", value, DATASET_KEYS)
    entries = {k: v for k, v in value.items() if k not in user_keys}
    if "reader" in entries and "path" in entries:
        raise ConfError(f"conf: {key} sets both 'reader' and 'path'; set one.")
    if "path" in entries:
        entries["reader"] = FileReader(entries.pop("path"), skip_header=entries.pop("skip_header", None))
    elif "skip_header" in entries:
        raise ConfError(f"conf: {key}['skip_header'] only applies with 'path'; pass it to FileReader(...) instead.")
    if "reader" not in entries or "columns" not in entries:
        raise ConfError(f"conf: {key} needs 'reader' (or 'path') and 'columns'.")
    entries.setdefault("batch_size", batch_size or 128)
    entries.setdefault("epoch", epoch)
    try:
        return DataSetSpec(name=key, need_label=need_label, **entries)
    except ElastimatorError:
        raise
    except (TypeError, ValueError) as e:
        raise ConfError(f"conf: {key}: {e}") from e


def _check_same_features(train: DataSetSpec, evaluation: DataSetSpec) -> None:
    def shape(spec):
        return [(c.name, c.dtype.name, c.is_label, c.is_sparse) for c in spec.columns]

    if shape(train) != shape(evaluation):
        raise ConfError(
            "conf: eval_set columns differ from train_set columns; the model sees both, so they must match "
            f"(names, dtypes, label, sparse). train_set: {shape(train)}; eval_set: {shape(evaluation)}."
        )


def _exporter(value) -> ExporterConf | Exporter:
    if isinstance(value, (ExporterConf, Exporter)):
        return value
    if isinstance(value, str):
        value = {"type": value}
    if not isinstance(value, Mapping):
        raise ConfError(f"conf: 'exporter' expected one of {_EXPORTER_TYPES}, a dict, or an Exporter; got {value!r}.")
    fields = {f.name for f in dataclasses.fields(ExporterConf)}
    unknown = sorted(set(value) - fields)
    if unknown:
        raise ConfError(f"conf: exporter has unknown key(s) {unknown}; expected some of {sorted(fields)}.")
    if value.get("type", "final") not in _EXPORTER_TYPES:
        raise ConfError(f"conf: exporter type expected one of {_EXPORTER_TYPES}; got {value.get('type')!r}.")
    keep = value.get("exports_to_keep", 5)
    if keep is not None and not is_int(keep, minimum=1):
        raise ConfError(f"conf: exporter 'exports_to_keep' expected int > 0 or None; got {keep!r}.")
    if "compare_fn" in value:
        try:
            BestExporter(serving_input_receiver_fn=lambda: None, compare_fn=value["compare_fn"])  # checks it
        except ConfigError as e:
            raise ConfError(f"conf: exporter: {e}") from None
    return ExporterConf(**value)


def load_conf(target: str) -> JobConf:
    """Imports and validates a conf: "module.Class", "module", "file.py" or "file.py:Class".

    Raises:
        ConfError: when it cannot be imported or is invalid.
    """
    obj, name = _import(target)
    if inspect.ismodule(obj) and not hasattr(obj, "classifier_class"):
        classes = _conf_classes(obj)
        if classes:
            joiner = ":" if target.endswith(".py") else "."
            raise ConfError(f"conf {target!r} sets no 'classifier_class' itself; it defines the conf class(es) "
                            f"{', '.join(classes)}. Name one: {target}{joiner}{classes[0]}.")
    return JobConf.from_object(obj, name=name)


def _conf_classes(module) -> list[str]:
    """The names of the conf classes a module defines (classes of its own that set `classifier_class`)."""
    return [n for n, v in vars(module).items()
            if inspect.isclass(v) and hasattr(v, "classifier_class") and v.__module__ == module.__name__]


def _no_such_conf(where: str, attr: str, module) -> ConfError:
    classes = _conf_classes(module)
    has = (f"it defines the conf class(es) {', '.join(classes)}" if classes else
           "it defines no conf class (a class that sets classifier_class)")
    return ConfError(f"{where} has no {attr!r}; {has}.")


def _import(target: str):
    # Confs and their model code import tf.estimator, tensorflow_estimator or DLRover's trainer paths.
    from elastimator import compat  # pylint: disable=import-outside-toplevel  # compat imports every layer

    compat.install()
    path, _, attr = target.partition(":")
    if path.endswith(".py"):
        if not os.path.isfile(path):
            raise ConfError(f"conf file {path!r} does not exist (current directory: {os.getcwd()}).")
        module_name = f"elastimator_conf_{abs(hash(os.path.abspath(path)))}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        try:
            spec.loader.exec_module(module)
        except Exception as e:  # noqa: BLE001 - a user's conf failed to import: say so once, clearly
            raise ConfError(f"conf file {path!r} failed to import: {type(e).__name__}: {e}") from e
        if not attr:
            return module, os.path.splitext(os.path.basename(path))[0]
        if not hasattr(module, attr):
            raise _no_such_conf(f"conf file {path!r}", attr, module)
        return getattr(module, attr), attr
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(target), target
    except ModuleNotFoundError as e:
        if e.name is None or not target.startswith(e.name):
            raise ConfError(f"conf {target!r} failed to import: {e}") from e
        module_name, _, attr = target.rpartition(".")
    except Exception as e:  # noqa: BLE001
        raise ConfError(f"conf {target!r} failed to import: {type(e).__name__}: {e}") from e
    try:
        module = importlib.import_module(module_name) if module_name else None
    except Exception as e:  # noqa: BLE001
        raise ConfError(f"conf {target!r}: module {module_name!r} failed to import: {type(e).__name__}: {e}") from e
    if module is None:
        raise ConfError(
            f"conf {target!r} not found. Expected 'package.module.ConfClass', 'path/to/conf.py' or "
            "'path/to/conf.py:ConfClass'."
        )
    if not hasattr(module, attr):
        raise _no_such_conf(f"conf module {module_name!r}", attr, module)
    return getattr(module, attr), attr
