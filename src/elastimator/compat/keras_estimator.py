"""`tf.keras.estimator` under compat, without loading Keras to attach it.

TensorFlow resolves `tf.keras` (and `tf.compat.v1.keras`) lazily: the first
attribute access imports the Keras module chosen by `TF_USE_LEGACY_KERAS` and
copies its namespace into the lazy object. Setting an attribute on the lazy
object would load Keras there and then, about 60 MB (tf-keras) to 150 MB
(Keras 3) for a program that may never use Keras. So the `estimator` attribute
goes onto the Keras module itself: now, if a program already loaded it, or as it
loads (an import hook that runs after the module executes, before the lazy
object copies its namespace).
"""

from __future__ import annotations

import functools
import importlib.abc
import sys
import types

from elastimator import _import_hooks

MODULES = ("tf_keras.api._v2.keras", "tf_keras.api._v1.keras", "keras._tf_keras.keras")
"""What `tf.keras` / `tf.compat.v1.keras` resolve to: tf-keras's v2 and v1 APIs, Keras 3's tf.keras view."""
_ABSENT = object()


class KerasEstimator:
    """Keeps `estimator` on whichever of `MODULES` loads, until `remove()` puts back what was there."""

    def __init__(self, estimator: types.ModuleType):
        self._estimator = estimator
        self._replaced: list[tuple[types.ModuleType, object]] = []
        self._finder = _AfterKerasLoads(self._attach)
        for name in MODULES:
            if name in sys.modules:
                self._attach(sys.modules[name])
        sys.meta_path.insert(0, self._finder)

    def _attach(self, module: types.ModuleType) -> None:
        self._replaced.append((module, vars(module).get("estimator", _ABSENT)))
        module.estimator = self._estimator  # tf-keras has a tf.keras.estimator of its own that needs tf.estimator

    def remove(self) -> None:
        if self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        for module, previous in reversed(self._replaced):
            if previous is _ABSENT:
                vars(module).pop("estimator", None)
            else:
                module.estimator = previous
        self._replaced.clear()
        tensorflow = sys.modules.get("tensorflow")
        if tensorflow is None:
            return
        # A lazy `keras` object that loaded copied the module's namespace, ours included: without the copy it
        # looks the name up in the module again.
        for owner in (tensorflow, tensorflow.compat.v1, tensorflow.compat.v2):
            loader = vars(owner).get("keras")
            if loader is not None and vars(loader).get("estimator") is self._estimator:
                del vars(loader)["estimator"]


class _AfterKerasLoads(importlib.abc.MetaPathFinder):
    def __init__(self, attach):
        self._attach = attach

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MODULES:
            return None
        spec = _import_hooks.spec_elsewhere(self, fullname, path, target)
        return _import_hooks.around_execution(spec, functools.partial(_import_hooks.then, self._attach))
