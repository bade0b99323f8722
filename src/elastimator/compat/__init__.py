"""`elastimator.compat`: run code written for `tf.estimator` on elastimator, unedited.

After `install()`, these all resolve to elastimator:

* `import tensorflow as tf; tf.estimator.Estimator(...)` and `tf.compat.v1.estimator...`;
* `import tensorflow_estimator` (and `tensorflow_estimator.estimator`);
* `tf.keras.estimator.model_to_estimator` (tf-keras models and Keras 3 models);
* the private modules libraries reached into, such as
  `from tensorflow.python.estimator.canned.head import _Head`, and TensorFlow's
  `distribute.estimator_training` (the table in `elastimator/migrate/surface.py`; `elastimator check PATH` reads
  a source tree against it);
* DeepRec's embedding variables (`tf.get_embedding_variable`, `tf.EmbeddingVariableOption`,
  `tf.feature_column.categorical_column_with_embedding`, ...; see `deeprec.py`);
* DLRover's trainer paths confs import (`dlrover.trainer.tensorflow.util.column_info.Column`,
  `...reader.file_reader.FileReader`, `...reader.base_reader.ElasticReader`,
  `dlrover.trainer.util.log_util.default_logger`), when DLRover itself is not installed
  (see `dlrover.py`).

Three ways to turn it on, from least to most hands-off:

    import elastimator.compat; elastimator.compat.install()
    import elastimator.compat.auto            # installs on import
    python -m elastimator.compat script.py [args...]   # runs an unmodified script

Installing attaches attributes to TensorFlow's module objects and adds entries to
`sys.modules`; it is the one place elastimator changes TensorFlow's namespace, it is
opt-in, idempotent, and `uninstall()` undoes it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys

from elastimator.tensorflow_import import require_supported

tf = require_supported()  # Imported by elastimator, TensorFlow leaves Keras for the program's first use of it.

# pylint: disable=wrong-import-position
from elastimator.compat import api, deeprec, dlrover
from elastimator.compat.keras_estimator import KerasEstimator
from elastimator.migrate import surface

__all__ = ["install", "installed", "uninstall"]

_TOP = "tensorflow_estimator"
_VERSION = "2.15.0"
"""The tensorflow_estimator release whose API this compatibility layer follows."""


class _MissingModuleFinder(importlib.abc.MetaPathFinder):
    """Turns an import of an estimator (or DLRover) module we do not serve into an error that says so."""

    def __init__(self, roots: tuple[str, ...]):
        self.roots = roots

    def find_spec(self, fullname, path=None, target=None):
        del path, target
        if any(fullname == r or fullname.startswith(r + ".") for r in self.roots):
            raise ModuleNotFoundError(
                f"{fullname} is not provided by elastimator.compat: it serves tf.estimator's public API, the "
                f"private names listed in elastimator/migrate/surface.py and DLRover's trainer column, reader and "
                f"logger modules (elastimator/compat/dlrover.py); `elastimator check PATH` lists what a program "
                f"uses. Import the equivalent from elastimator (see docs/migration.md) or open an issue naming the "
                f"module.", name=fullname)
        return None


_ABSENT = object()


class _State:
    """What install() changed, so uninstall() can put it back."""

    def __init__(self):
        self.modules: list[str] = []
        self.attributes: list[tuple[object, str, object]] = []
        """(owner, attribute, the value it had or _ABSENT), in the order they were set."""
        self.finder: _MissingModuleFinder | None = None
        self.keras: KerasEstimator | None = None


_state: _State | None = None


def installed() -> bool:
    """True between `install()` and `uninstall()`."""
    return _state is not None


def install() -> None:
    """Makes `tf.estimator`, `tensorflow_estimator`, the private estimator modules and (without DLRover)
    DLRover's trainer paths resolve to elastimator."""
    global _state  # pylint: disable=global-statement  # The one process-wide switch; see the module docstring.
    if _state is not None:
        return
    state = _State()
    public = api.public_modules()
    top = api._module(_TOP, "tensorflow_estimator, served by elastimator.compat.",  # pylint: disable=protected-access
                      estimator=public["v2"], __version__=_VERSION)
    top.__path__ = []
    modules = {_TOP: top, f"{_TOP}.estimator": public["v2"], "tensorflow.estimator": public["v2"],
               "tensorflow.compat.v1.estimator": public["v1"], **api.private_modules()}
    # The package between the top and the private root, so that `import tensorflow_estimator.python.estimator.X
    # as x` (which walks attributes from the top) and `from tensorflow_estimator.python import estimator` work.
    python = api._module(f"{_TOP}.python", "tensorflow_estimator.python, served by elastimator.compat.",  # pylint: disable=protected-access
                         estimator=modules[f"{_TOP}.python.estimator"])
    python.__path__ = []
    modules[python.__name__] = top.python = python
    roots = api.PRIVATE_ROOTS + (_TOP,)
    if not dlrover.real_dlrover_installed():
        modules.update(dlrover.modules())
        roots += (dlrover.ROOT,)
    for name, module in modules.items():
        if name not in sys.modules:
            sys.modules[name] = module
            state.modules.append(name)
    import tensorflow.python as tf_python  # pylint: disable=import-outside-toplevel

    keras_estimator = api._module(  # pylint: disable=protected-access
        "tensorflow.keras.estimator", "tf.keras.estimator, served by elastimator.",
        model_to_estimator=api.model_to_estimator)
    owners = [(tf, public["v2"]), (tf_python, modules["tensorflow.python.estimator"])]
    for version in ("v1", "v2"):
        # `tf.compat.v1` is TensorFlow's `tensorflow._api.v2.compat.v1`; the first `import tensorflow.compat.v1`
        # (a program's, or tf-keras's as Keras loads) makes a module object of that name and rebinds `tf.compat`
        # to its parent. Made now, both objects get the attribute, whichever a program reaches.
        importlib.import_module(f"tensorflow.compat.{version}")
        owners += [(sys.modules[f"tensorflow._api.v2.compat.{version}"], public[version]),
                   (sys.modules[f"tensorflow.compat.{version}"], public[version])]
        for outer in ("v1", "v2"):  # `tf.compat.v2.compat.v1` and the rest: AdaNet reaches estimator through it
            owners.append((importlib.import_module(f"tensorflow._api.v2.compat.{outer}.compat.{version}"),
                           public[version]))
    for owner, value in owners:
        if "estimator" not in vars(owner):
            setattr(owner, "estimator", value)
            state.attributes.append((owner, "estimator", _ABSENT))
    for name in surface.REMOVED_TF_MODULES:  # `tensorflow.python.distribute.estimator_training`, as an attribute too
        parent, _, child = name.rpartition(".")
        owner = importlib.import_module(parent)
        if child not in vars(owner):
            setattr(owner, child, modules[name])
            state.attributes.append((owner, child, _ABSENT))
    for owner, name, value in deeprec.attributes():
        state.attributes.append((owner, name, vars(owner).get(name, _ABSENT)))
        setattr(owner, name, value)
    state.keras = KerasEstimator(keras_estimator)
    state.finder = _MissingModuleFinder(roots)
    sys.meta_path.append(state.finder)
    _state = state


def uninstall() -> None:
    """Undoes `install()`: the estimator names disappear from TensorFlow and sys.modules again."""
    global _state  # pylint: disable=global-statement
    if _state is None:
        return
    for name in _state.modules:
        sys.modules.pop(name, None)
    for owner, attribute, previous in reversed(_state.attributes):
        if previous is _ABSENT:
            delattr(owner, attribute)
        else:
            setattr(owner, attribute, previous)
    if _state.finder in sys.meta_path:
        sys.meta_path.remove(_state.finder)
    if _state.keras is not None:
        _state.keras.remove()
    _state = None
