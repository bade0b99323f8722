"""Imports run one way: each package imports only packages of its own layer or below (docs/architecture.md,
"Layers"), and no modules import each other in a circle. Every import counts, those inside functions too: an
import deferred to a call still ties the two modules together."""

import ast
import collections
import pathlib

import elastimator

SOURCE = pathlib.Path(elastimator.__file__).parent

LAYERS = [
    # Foundations: errors, small helpers, the TensorFlow import, and what reads source without TensorFlow.
    {"errors", "_validate", "_records", "_network", "_context_patch", "_import_hooks", "_keras_routing",
     "tensorflow_import", "long_lived", "migrate"},
    # tf.estimator's namespaces and building blocks the engine uses.
    {"export", "inputs", "optimizers", "embedding"},
    # The engine.
    {"estimator"},
    # On the engine: train_and_evaluate, canned estimators, Keras models, TPUEstimator programs, data pipelines.
    {"train_eval", "premade", "keras", "tpu", "data"},
    # tf.estimator.experimental (over premade and train_eval); elastic sharding (over data and the engine).
    {"experimental", "elastic"},
    # tf.estimator's surface for unedited programs; processes and Kubernetes.
    {"compat", "cluster"},
    # The conf-driven job runner.
    {"job"},
    # Entry points.
    {"cli", "dlrover_entry", "__main__"},
]
LAYER_OF = {package: index for index, packages in enumerate(LAYERS) for package in packages}


def _modules() -> dict[str, pathlib.Path]:
    modules = {}
    for path in SOURCE.rglob("*.py"):
        parts = ("elastimator", *path.relative_to(SOURCE).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _imports(modules) -> dict[str, set[str]]:
    """Module -> the elastimator modules it imports (anywhere in it)."""

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges = collections.defaultdict(set)
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                target = resolve(name) if name.startswith("elastimator.") else None
                if target and target != module:
                    edges[module].add(target)
    return edges


def _layer(module: str) -> int:
    parts = module.split(".")
    if parts[-1] == "__main__":  # `python -m elastimator.compat` is an entry point, whatever its package
        return LAYER_OF["__main__"]
    return LAYER_OF[parts[1]] if len(parts) > 1 else 0


def test_every_package_has_a_layer():
    modules = _modules()
    assert {m.split(".")[1] for m in modules if "." in m} <= set(LAYER_OF), "a new package: give it a layer"


def test_no_import_runs_up_a_layer():
    edges = _imports(_modules())
    upward = sorted(f"{a} -> {b}" for a, targets in edges.items() for b in targets
                    if b != "elastimator" and _layer(b) > _layer(a))
    assert not upward


def test_no_modules_import_each_other_in_a_circle():
    edges = _imports(_modules())
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(module):  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in edges.get(module, ()):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in _modules():
        if module not in index:
            visit(module)
    assert not circles
