"""What a conf declares, read from its source without importing it (no TensorFlow, no model code): for
commands that describe a job without running it, such as `elastimator k8s manifest`, which must know whether
the job has parameter servers."""

from __future__ import annotations

import ast
import difflib
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


def _bound_names(tree: ast.Module) -> set[str] | None:
    """The names a module's top level binds (more, never fewer), or None where they cannot be known from its
    source (a star import, a module `__getattr__`, a write to `globals()` or `sys.modules`)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
            return None
        if isinstance(node, ast.Name) and node.id in ("globals", "vars", "exec", "setattr", "__import__"):
            return None
        if isinstance(node, ast.Attribute) and node.attr == "modules":  # sys.modules[__name__].X = ...
            return None
        if isinstance(node, ast.Global):  # a function that binds a module name
            names.update(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        else:
            # Assignments anywhere at the top level (in an if, a try, a for), walrus and loop targets included.
            for inner in ast.walk(node):
                if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                    names.add(inner.id)
                elif isinstance(inner, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(inner.name)
                elif isinstance(inner, (ast.Import, ast.ImportFrom)):
                    names.update((alias.asname or alias.name).split(".")[0] for alias in inner.names)
    return None if "__getattr__" in names else names


def _conf_classes(tree: ast.Module) -> list[str]:
    """Classes of the module that set classifier_class, themselves or through a base class of the same file."""
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}

    def sets_classifier(name: str, seen: set[str]) -> bool:
        node = classes.get(name)
        if node is None or name in seen:
            return False
        seen.add(name)
        for statement in node.body:
            targets = statement.targets if isinstance(statement, ast.Assign) else (
                [statement.target] if isinstance(statement, ast.AnnAssign) else [])
            if any(isinstance(t, ast.Name) and t.id == "classifier_class" for t in targets):
                return True
            if isinstance(statement, ast.FunctionDef) and statement.name == "classifier_class":
                return True
        return any(sets_classifier(base.id, seen) for base in node.bases if isinstance(base, ast.Name))

    return [name for name in classes if sets_classifier(name, set())]


def missing_conf_class(target: str) -> str | None:
    """Where a conf target names a class its file (here, readable) surely does not define: the error, with the
    conf classes it does define and the nearest one. None where it does, or where its source cannot tell."""
    path, name = _locate(target)
    if path is None or name is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None  # the import says what is wrong with it
    bound = _bound_names(tree)
    if bound is None or name in bound:
        return None
    classes = _conf_classes(tree)
    has = (f"it defines the conf class(es) {', '.join(classes)}" if classes else
           "it defines no conf class (a class that sets classifier_class)")
    near = difflib.get_close_matches(name, classes, n=1, cutoff=0.6)
    hint = f" Did you mean {target.rpartition(name)[0]}{near[0]}?" if near else ""
    return f"conf file {path!r} has no {name!r}; {has}.{hint}"
