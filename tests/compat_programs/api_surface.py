"""The public surface of an estimator API, as data: which names a namespace has, what each is, its call
signature and its members. `record_api.py` writes tf.estimator 2.15's into `api_tf215.json`;
`test_api_reference.py` describes elastimator's the same way and compares the two.

Runs on any TensorFlow (2.15 or elastimator's), so it imports nothing of either.
"""

from __future__ import annotations

import enum
import inspect
import types

NAMESPACES = {
    "tf.estimator": ("export", "experimental"),
    "tf.compat.v1.estimator": ("export", "experimental", "inputs", "tpu", "tpu.experimental"),
}
"""Each public namespace and the submodules of it that are described too."""

_SIMPLE = (type(None), bool, int, float, str, bytes)


def default_text(value) -> str | None:
    """A parameter's default as comparable text: repr for plain values, a name for functions and classes."""
    if value is inspect.Parameter.empty:
        return None
    if isinstance(value, _SIMPLE):
        return repr(value)
    if isinstance(value, enum.Enum):
        return repr(value.value)
    if isinstance(value, (tuple, list, frozenset, set)):
        return f"{type(value).__name__}({', '.join(sorted(default_text(v) or '' for v in value))})"
    name = getattr(value, "__name__", None)
    if name is not None:
        return f"<{name}>"
    return "<instance>"  # a sentinel object: its type is an implementation detail


def signature_of(value) -> list[list] | None:
    """[[name, kind, default text], ...] of a callable (a class: of calling it), or None where it has none."""
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return None
    return [[p.name, p.kind.name, default_text(p.default)] for p in signature.parameters.values()]


def _fields(cls: type) -> tuple[str, ...]:
    """A namedtuple's or a dataclass's fields: data members an instance has though the class may not."""
    fields = getattr(cls, "_fields", None)
    if isinstance(fields, tuple):
        return fields
    return tuple(getattr(cls, "__dataclass_fields__", {}))


def _member_kind(owner: type, name: str) -> str:
    if name in _fields(owner):
        return "field"
    raw = inspect.getattr_static(owner, name)
    if isinstance(raw, property):
        return "property"
    if isinstance(raw, classmethod):
        return "classmethod"
    if isinstance(raw, staticmethod):
        return "staticmethod"
    if inspect.isfunction(raw) or inspect.ismethoddescriptor(raw):
        return "method"
    if isinstance(raw, type):
        return "class"
    return "attribute"


def describe_class(cls: type) -> dict:
    members = {}
    for name in sorted(set(dir(cls)) | set(_fields(cls))):
        if name.startswith("_"):
            continue
        kind = _member_kind(cls, name)
        entry: dict = {"kind": kind}
        if kind in ("method", "classmethod", "staticmethod"):
            entry["signature"] = signature_of(getattr(cls, name))
        elif kind == "attribute":
            value = inspect.getattr_static(cls, name)
            if isinstance(value, _SIMPLE):
                entry["value"] = value
        members[name] = entry
    return {"kind": "class", "home": cls.__module__, "signature": signature_of(cls), "members": members,
            "bases": [base.__name__ for base in cls.__mro__[1:]]}


def describe(value) -> dict:
    if isinstance(value, types.ModuleType):
        return {"kind": "module"}
    if isinstance(value, type):
        return describe_class(value)
    if callable(value):
        return {"kind": "function", "home": getattr(value, "__module__", None), "signature": signature_of(value)}
    entry: dict = {"kind": "value", "type": type(value).__name__}
    if isinstance(value, _SIMPLE):
        entry["value"] = value
    return entry


def public_names(module: types.ModuleType) -> list[str]:
    return sorted(name for name in dir(module) if not name.startswith("_"))


def surface(roots: dict[str, types.ModuleType]) -> dict[str, dict]:
    """{'tf.estimator.Estimator': {...}, ...} for every public name of each root and its described submodules."""
    described = {}
    for root_name, root in roots.items():
        for sub in ("", *NAMESPACES[root_name]):
            module = root
            for part in filter(None, sub.split(".")):
                module = getattr(module, part, None)
            if module is None:
                continue
            prefix = f"{root_name}.{sub}" if sub else root_name
            for name in public_names(module):
                described[f"{prefix}.{name}"] = describe(getattr(module, name))
    return described
