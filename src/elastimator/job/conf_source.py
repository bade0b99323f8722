"""What a conf declares, read from its source without importing it (no TensorFlow, no model code): for
commands that describe a job without running it, such as `elastimator k8s manifest`, which must know whether
the job has parameter servers."""

from __future__ import annotations

import ast
import os

UNREADABLE = "unreadable"
"""`declared_strategy`'s answer when the conf's file is not here to read (a path as the container sees it)."""


def declared_strategy(target: str) -> str | None:
    """The `strategy` a conf sets as a string literal ("path/conf.py", "path/conf.py:Class", "pkg.mod.Class"),
    its base classes in the same file included; None where it sets none (the conf's default, parameter_server),
    UNREADABLE where the file cannot be read here."""
    path, name = _locate(target)
    if path is None:
        return UNREADABLE
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return UNREADABLE
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    if name is None:
        return _assigned(tree.body)
    seen: set[str] = set()
    while name in classes and name not in seen:
        seen.add(name)
        found = _assigned(classes[name].body)
        if found is not None:
            return found
        bases = [base.id for base in classes[name].bases if isinstance(base, ast.Name)]
        name = bases[0] if bases else None
    return _assigned(tree.body) if name is None else None


def _locate(target: str) -> tuple[str | None, str | None]:
    """(file, class name or None) of a conf target, where the file exists here."""
    file, _, name = target.partition(":")
    if file.endswith(".py"):
        return (file if os.path.isfile(file) else None), (name or None)
    module, _, attribute = target.rpartition(".")
    as_file = lambda dotted: dotted.replace(".", os.sep) + ".py"  # noqa: E731
    for candidate, cls in ((as_file(target), None), (as_file(module), attribute)):
        if candidate != ".py" and os.path.isfile(candidate):
            return candidate, cls
    return None, None


def _assigned(body) -> str | None:
    for node in body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "strategy" for t in node.targets):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return node.value.value
    return None
