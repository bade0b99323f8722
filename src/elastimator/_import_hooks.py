"""Stepping into an import: a module found as every other finder finds it, executed inside a context of ours.

Used where elastimator must act as a module loads without importing it first: to quiet TensorFlow's native
start-up lines (`tensorflow_import`) and to give the Keras module `tf.keras` resolves to its `estimator`
attribute (`compat.keras_estimator`), which keeps Keras unloaded until a program uses it.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import sys
from typing import Callable, ContextManager

Around = Callable[[object], ContextManager]
"""Given the module about to execute, a context its execution runs in."""


def spec_elsewhere(finder, name: str, path=None, target=None):
    """The spec the finders on sys.meta_path other than `finder` give for `name`, or None."""
    for other in list(sys.meta_path):
        find = getattr(other, "find_spec", None)
        if other is finder or find is None:
            continue
        spec = find(name, path, target)
        if spec is not None:
            return spec
    return None


def around_execution(spec, around: Around):
    """`spec`, its module to be executed inside `around(module)` (unchanged when its loader cannot be wrapped)."""
    if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
        spec.loader = _LoaderAround(spec.loader, around)
    return spec


@contextlib.contextmanager
def then(action: Callable[[object], None], module):
    """A context that runs `action(module)` once the module executed without an error."""
    yield
    action(module)


class _LoaderAround(importlib.abc.Loader):
    """Another loader's module, executed inside a context."""

    def __init__(self, loader, around: Around):
        self._loader, self._around = loader, around

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = self._loader  # what the module reports, as if nobody had stepped in
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        with self._around(module):
            self._loader.exec_module(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)
