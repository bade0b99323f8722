"""Importing TensorFlow: the supported versions, and a quiet import for the command line.

elastimator runs on every TensorFlow release since tf.estimator's removal: 2.16 through 2.21, CPU or
GPU builds. `require_supported()` imports TensorFlow once and says clearly when none, or an older
one, is installed. `import_quietly()` is the command line's import: TensorFlow's native runtime
prints lines while it loads (absl's "All log messages before absl::InitializeLog()", "Could not find
cuda drivers") that no setting turns off, so they are held back unless the user asked for them.

When elastimator is the one to import TensorFlow, Keras is left for later (`_keras_deferred`): TensorFlow's
own `__init__` imports Keras eagerly (tf-keras, or Keras 3 with pandas, matplotlib and scikit-learn behind
it), and a job that builds its model from TensorFlow ops never uses it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import re
import sys
import tempfile
import threading
import warnings

from elastimator import _import_hooks

OLDEST = (2, 16)
NEWEST_TESTED = (2, 21)
_INSTALL_HINT = "pip install 'tensorflow>=2.16,<2.22' 'tf-keras>=2.16,<2.22' (tensorflow[and-cuda] for GPUs)"
_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-intel", "tf-nightly", "tf-nightly-cpu")
"""Wheels that install the same `tensorflow` package; two of different versions leave a mix of both."""

_NATIVE = (r"^WARNING: All log messages before absl::InitializeLog\(\)"
           r"|^[{levels}]\d{{4}} [\d:. ]+\d+ \S+:\d+\]"  # absl's format (TF >= 2.17): I0000 00:00:17.5 123 x.cc:31]
           r"|^\d{{4}}-\d\d-\d\d [\d:.]+: [{levels}] \S+:\d+\]")  # TF 2.16's: 2026-01-01 10:00:00.1: I x.cc:31]
NATIVE_LOG_LINE = re.compile(_NATIVE.format(levels="IWEF"))
"""A line TensorFlow's C++ runtime wrote (any level)."""
_LOAD_NOISE = re.compile(_NATIVE.format(levels="IW") + r"|^To enable the following instructions: .* rebuild TensorFlow")
"""What TensorFlow's native runtime prints while it loads: cudart_stub, cpu_feature_guard, TF-TRT."""
_QUIET_START_NOISE = re.compile(_LOAD_NOISE.pattern + r"|^(?:" + _NATIVE.format(levels="E").replace("^", "")
                                + r").*failed call to cuInit")
"""The load noise, and the CUDA driver's absence reported as an error on a machine without a GPU."""
_DEPRECATED_V1_LAYERS = r"`tf\.layers\..*` is deprecated"
_FIRST_SESSION_NOISE = re.compile(r"^(?:" + _NATIVE.format(levels="I").replace("^", "")
                                  + r").*MLIR V1 optimization pass is not enabled")
"""What the first graph a process runs prints (an INFO line about a pass TensorFlow leaves off)."""

logger = logging.getLogger("elastimator")


class UnsupportedTensorFlowError(ImportError):
    """No TensorFlow, or one older than 2.16, is installed."""


def parse_version(text: str) -> tuple[int, int]:
    """(major, minor) of a TensorFlow version string such as '2.21.0' or '2.17.0rc1'."""
    match = re.match(r"(\d+)\.(\d+)", text)
    if match is None:
        raise UnsupportedTensorFlowError(f"cannot read TensorFlow's version {text!r}.")
    return int(match.group(1)), int(match.group(2))


def check_version(version: str) -> None:
    """Raises for a TensorFlow older than 2.16; warns once for one newer than elastimator was tested on."""
    found = parse_version(version)
    if found < OLDEST:
        raise UnsupportedTensorFlowError(
            f"elastimator runs on TensorFlow {OLDEST[0]}.{OLDEST[1]} or newer; this environment has {version}, "
            f"which still ships tf.estimator itself. To upgrade: {_INSTALL_HINT}.")
    if found > NEWEST_TESTED:
        logger.warning("TensorFlow %s is newer than elastimator was tested on (%d.%d); report what breaks.",
                       version, *NEWEST_TESTED)


def check_single_build(installed: dict[str, str]) -> None:
    """Raises when wheels of different versions wrote the same `tensorflow` package (e.g. `tensorflow-cpu`
    2.17 beside the `tensorflow` 2.21 that tf-keras 2.21 pulls in): its files are then a mix of both."""
    if len(set(installed.values())) > 1:
        found = ", ".join(f"{name} {version}" for name, version in sorted(installed.items()))
        raise UnsupportedTensorFlowError(
            f"two TensorFlow builds of different versions are installed over each other ({found}). Keep one: "
            f"pip uninstall {' '.join(sorted(installed))}, then pip install 'tensorflow==X.Y.*' 'tf-keras==X.Y.*' "
            "for the version you want.")


def installed_builds() -> dict[str, str]:
    """The TensorFlow wheels pip installed here, by distribution name: their versions."""
    from importlib import metadata  # pylint: disable=import-outside-toplevel

    installed = {}
    for name in _DISTRIBUTIONS:
        try:
            installed[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return installed


def _normalized(name: str) -> str:
    return name.lower().replace("_", "-")


def version_beside(package_dir: str) -> str | None:
    """The version of the TensorFlow wheel that installed `package_dir` (a `tensorflow` package), read from the
    metadata pip wrote beside it; None where there is none (a build from source, a checkout)."""
    from importlib import metadata  # pylint: disable=import-outside-toplevel

    versions = {dist.version for dist in metadata.distributions(path=[os.path.dirname(package_dir)])
                if _normalized(dist.metadata.get("Name") or "") in _DISTRIBUTIONS}
    return min(versions, key=parse_version) if len(versions) == 1 else None  # two: require_supported says so


def for_the_command_line(argv: list[str]) -> bool:
    """Whether this process is the `elastimator` command (its console script, or `python -m elastimator.cli`):
    it answers --help and its TensorFlow-free commands (`check`, `k8s`, `scale`) whatever TensorFlow is here,
    and says what to install on a command that needs TensorFlow."""
    return len(argv) > 1 and (os.path.basename(argv[1]) == "elastimator" or argv[1:3] == ["-m", "elastimator.cli"])


def check_installed() -> None:
    """`import elastimator`'s check, without importing TensorFlow: raises `UnsupportedTensorFlowError` when none
    is installed, or the one `import tensorflow` would load is older than 2.16 (as its wheel's metadata says).
    Where its version cannot be read so, the first use of the API checks it (`require_supported`)."""
    if "tensorflow" in sys.modules and sys.modules["tensorflow"] is None:  # `import tensorflow` would fail
        raise UnsupportedTensorFlowError(_NONE_INSTALLED)
    loaded = sys.modules.get("tensorflow")
    if loaded is not None:
        version = getattr(loaded, "__version__", None)
    else:
        spec = _tensorflow_spec()
        if spec is None:
            raise UnsupportedTensorFlowError(_NONE_INSTALLED)
        locations = list(spec.submodule_search_locations or [])
        version = version_beside(locations[0]) if locations else None
    if version is not None and parse_version(version) < OLDEST:
        check_version(version)


def _tensorflow_spec():
    """Where `import tensorflow` would load it from, asking every finder but the quiet start's (which steps
    aside once asked, and must be there for the import itself)."""
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None or isinstance(finder, _QuietTensorFlowFinder):
            continue
        spec = find("tensorflow", None)
        if spec is not None:
            return spec
    return None


_NONE_INSTALLED = (f"elastimator needs TensorFlow {OLDEST[0]}.{OLDEST[1]} to {NEWEST_TESTED[0]}.{NEWEST_TESTED[1]}, "
                   f"and none is installed: {_INSTALL_HINT}.")


@functools.cache  # the public API's lazy names call it on first use of each: check (and warn) once
def require_supported():
    """Imports TensorFlow and returns it, or raises `UnsupportedTensorFlowError` saying what to install."""
    if "tensorflow" not in sys.modules:
        check_single_build(installed_builds())
        check_installed()  # a too old one is refused before its seconds of import
    try:
        with _keras_deferred():
            import tensorflow as tf  # pylint: disable=import-outside-toplevel
    except ModuleNotFoundError as e:
        if e.name != "tensorflow":
            raise
        raise UnsupportedTensorFlowError(_NONE_INSTALLED) from None
    check_version(tf.__version__)
    _print_tensorflow_lines_once(tf.get_logger())
    return tf


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _print_tensorflow_lines_once(logger: logging.Logger) -> None:
    """TensorFlow's logger gets a handler of its own when it is first asked for before the program configures
    logging (importing TensorFlow does that); a program that then calls `logging.basicConfig` printed each of
    its lines twice, through that handler and through the root logger's. The handler now stays quiet while the
    root logger prints. TensorFlow's notices that a call inside elastimator is deprecated are dropped: the user
    cannot act on them."""
    if getattr(logger, "_elastimator_tidy", False):
        return
    logger._elastimator_tidy = True  # pylint: disable=protected-access
    for handler in logger.handlers:
        handler.addFilter(lambda record: not (logger.propagate and logging.getLogger().handlers))
    logger.addFilter(_not_about_elastimator)


def _not_about_elastimator(record: logging.LogRecord) -> bool:
    """False for TensorFlow's deprecation notice about a call elastimator makes ("From .../elastimator/..."), or
    about a call TensorFlow makes for elastimator (`tf.compat.v1.feature_column.input_layer`, which the canned
    estimators call, reads v2 columns through their deprecated `_get_dense_tensor`): the user's program made
    neither, and 2.15 printed neither."""
    message = record.msg if isinstance(record.msg, str) else ""
    if not message.startswith("From %s:"):
        return True
    where = str(record.args[0] if isinstance(record.args, tuple) and record.args else "")
    if where.startswith(_PACKAGE_DIR + os.sep):
        return False
    tensorflow_dir = os.path.dirname(getattr(sys.modules.get("tensorflow"), "__file__", None) or os.sep)
    return not (where.startswith(tensorflow_dir + os.sep) and _called_from_elastimator(tensorflow_dir))


def _called_from_elastimator(tensorflow_dir: str) -> bool:
    """Whether the innermost frame on this thread's stack outside TensorFlow, `logging` and this module (the code
    that called into TensorFlow) is elastimator's."""
    skipped = (tensorflow_dir + os.sep, os.path.dirname(logging.__file__) + os.sep)
    frame = sys._getframe(1)  # pylint: disable=protected-access
    while frame is not None:
        path = frame.f_code.co_filename
        if path != __file__ and not path.startswith(skipped):
            return path.startswith(_PACKAGE_DIR + os.sep)
        frame = frame.f_back
    return False


KERAS_PACKAGES = ("keras", "tf_keras")


class _KerasLater:
    """While TensorFlow imports, on the importing thread: Keras's packages are found (TensorFlow asks where they
    live) but do not load, as if Keras were not installed, a case TensorFlow's `__init__` allows for."""

    def __init__(self):
        self._thread = threading.get_ident()

    def find_spec(self, name, path=None, target=None):
        if name not in KERAS_PACKAGES or threading.get_ident() != self._thread:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None:
            spec.loader = _NotYet(name)
        return spec


class _NotYet:
    def __init__(self, name: str):
        self._name = name

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        raise ImportError(f"{self._name} is imported where a program first uses it, not with TensorFlow")


@contextlib.contextmanager
def _keras_deferred():
    """Imports of Keras fail while TensorFlow imports (see `_KerasLater`); afterwards they work as ever.

    TensorFlow then resolves `tf.keras` and `tf.compat.v1.layers` lazily, on first use, as it always has;
    only its eager import of Keras's optimizers (which registers them for loading Keras SavedModels) waits
    until Keras is imported. On TF 2.21 with tf-keras this saves about 60 MB and 0.7 s per process; with
    Keras 3 about 120 MB (pandas, matplotlib, scikit-learn and SciPy stay out).
    """
    if "tensorflow" in sys.modules or any(name in sys.modules for name in KERAS_PACKAGES):
        yield
        return
    finder = _KerasLater()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def import_quietly(verbose: bool):
    """Imports TensorFlow for the command line: its load-time native lines and v1-layer deprecation
    warnings only when `verbose`; its Python logger at ERROR unless `verbose`, and printed once."""
    if not verbose:
        # Native INFO/WARNING/ERROR lines after the load ("failed call to cuInit" on a machine without a GPU);
        # real failures still reach the user as Python exceptions.
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        warnings.filterwarnings("ignore", message=_DEPRECATED_V1_LAYERS)
        # TensorFlow's and Keras's notices about their own internals (`layer.add_variable`, which feature columns
        # call): nothing the user's program can change.
        warnings.filterwarnings("ignore", message=".*is deprecated and will be removed", category=UserWarning,
                                module=r"(tensorflow|tf_keras|keras)\.")
    already = "tensorflow" in sys.modules
    with contextlib.nullcontext() if verbose or already else _native_stderr_filtered(_LOAD_NOISE):
        tf = require_supported()
    # TensorFlow's logger prints through its own handler; passed on to the root logger as well, each of its
    # lines (shown when a program sets tf.compat.v1.logging.set_verbosity(INFO)) came out twice.
    tf.get_logger().propagate = False
    if not verbose:
        tf.get_logger().setLevel(logging.ERROR)
        # Parts of TensorFlow log through absl instead ("path_and_singleprint metric could not be logged").
        logging.getLogger("absl").setLevel(logging.WARNING)
    return tf


def quiet_tensorflow_import() -> None:
    """Makes the first `import tensorflow` of this process, by whoever, hold back what TensorFlow's native
    runtime prints while it loads (TF 2.21 prints its start-up block twice: oneDNN, cudart_stub, CPU features).

    A program that imports elastimator before TensorFlow gets a quiet start, as the command line does; one that
    imports TensorFlow first has already printed it. Nothing changes where TensorFlow is already imported, or
    where the user chose the native log level (TF_CPP_MIN_LOG_LEVEL): they see what they asked for.
    """
    if "tensorflow" in sys.modules or "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        return
    if not any(isinstance(finder, _QuietTensorFlowFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlowFinder())


class _QuietTensorFlowFinder(importlib.abc.MetaPathFinder):
    """Finds `tensorflow` as the other finders do, once, and loads it with fd 2 filtered."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "tensorflow":
            return None
        sys.meta_path.remove(self)
        return _import_hooks.around_execution(importlib.util.find_spec(fullname), _quiet_start)


class _QuietStartState:
    """Whether this process's quiet start still has the first session to hold back (set once TensorFlow loaded
    quietly; cleared by that session)."""

    first_session_pending = False


@contextlib.contextmanager
def _quiet_start(module):
    with _native_stderr_filtered(_QUIET_START_NOISE):
        yield
        # The GPU platform's first look for a driver happens here, not at the first session: on a machine
        # without one it prints "failed call to cuInit", which reads like a failure and is none. (Listing
        # physical devices leaves them configurable: set_logical_device_configuration still works.)
        module.config.list_physical_devices("GPU")
    _QuietStartState.first_session_pending = True


@contextlib.contextmanager
def quiet_first_session():
    """Around the creation of an engine session: where TensorFlow started quietly, the first one the process
    makes leaves out the INFO line its first graph run prints ("MLIR V1 optimization pass is not enabled")."""
    if not _QuietStartState.first_session_pending:
        yield
        return
    _QuietStartState.first_session_pending = False
    with _native_stderr_filtered(_FIRST_SESSION_NOISE):
        yield


@contextlib.contextmanager
def _native_stderr_filtered(noise: re.Pattern):
    """Holds back file descriptor 2 (native code writes there directly) and replays it without `noise`."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = [line for line in held.read().decode(errors="replace").splitlines(keepends=True)
                    if not noise.match(line)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()
