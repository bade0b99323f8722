"""The module objects `elastimator.compat.install()` puts where estimator code imports from.

Three shapes of import are served:

* the public API: `tf.estimator`, `tf.compat.v1.estimator` (which adds `inputs`),
  `import tensorflow_estimator as tfe; tfe.estimator`;
* the private paths third-party code reached into:
  `tensorflow.python.estimator.<module>` and
  `tensorflow_estimator.python.estimator.<module>` (the same table under both);
* nothing else: an unlisted private module fails with an ImportError that says so.

Each namespace is a plain module whose attributes are elastimator's own objects, so
`tf.estimator.Estimator is elastimator.Estimator`.
"""

from __future__ import annotations

import importlib
import types

import tensorflow as tf

import elastimator
from elastimator import experimental, export, inputs, premade, tpu
from elastimator.keras import model_to_estimator
from elastimator.migrate import surface
from elastimator.migrate.surface import PRIVATE_ROOTS
from elastimator.premade.v1 import V1_CANNED

def _module(name: str, doc: str, **attributes) -> types.ModuleType:
    module = types.ModuleType(name, doc)
    module.__dict__.update(attributes)
    return module


def _estimator_api(name: str, *, v1: bool) -> types.ModuleType:
    attributes = {n: getattr(elastimator, n) for n in surface.ENGINE}
    attributes.update({n: getattr(premade, n) for n in surface.CANNED})
    attributes.update({n: getattr(tf.compat.v1.train, n) for n in surface.HOOKS})
    attributes.update(export=export, experimental=experimental)
    if v1:
        attributes["inputs"] = inputs
        attributes["tpu"] = _module(f"{name}.tpu", "tf.compat.v1.estimator.tpu, served by elastimator.",
                                    **{n: getattr(tpu, n) for n in surface.SUBMODULES["tpu"]})
        attributes.update(V1_CANNED)  # Losses summed over the batch, as tf.compat.v1.estimator's were.
    return _module(name, f"tf.estimator ({'v1' if v1 else 'v2'} API), served by elastimator.", **attributes)


def public_modules() -> dict[str, types.ModuleType]:
    """`tf.estimator` (v2) and `tf.compat.v1.estimator` (v1), keyed by where they are attached."""
    return {"v2": _estimator_api("tensorflow.estimator", v1=False),
            "v1": _estimator_api("tensorflow.compat.v1.estimator", v1=True)}


def resolve(target: str):
    """The object a table entry names: `"module:attribute"`."""
    module, _, attribute = target.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, attribute) if attribute else loaded


def private_modules() -> dict[str, types.ModuleType]:
    """Every private module path under both roots, and TensorFlow's modules that left with tf.estimator, as
    modules (packages get a `__path__`)."""
    table = {path: {name: resolve(served.target) for name, served in names.items()}
             for path, names in surface.PRIVATE.items()}
    packages = {path.rpartition(".")[0] for path in table if "." in path} | {""}
    modules = {}
    for root in PRIVATE_ROOTS:
        for path, names in table.items():
            full = f"{root}.{path}" if path else root
            module = _module(full, f"{full}, served by elastimator.compat.", **names)
            if path in packages:
                module.__path__ = []  # A package: its submodules come from sys.modules.
            modules[full] = module
    for full, module in modules.items():  # Parents expose children as attributes, as real packages do.
        parent, _, child = full.rpartition(".")
        if parent in modules:
            setattr(modules[parent], child, module)
    for full, names in surface.REMOVED_TF_MODULES.items():
        modules[full] = _module(full, f"{full} (removed from TensorFlow with tf.estimator), served by "
                                      "elastimator.compat.", **{n: resolve(s.target) for n, s in names.items()})
    return modules
