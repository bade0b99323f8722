"""`elastimator check PATH`: every use of tf.estimator's API in a source tree, and whether elastimator serves it.

Reads Python source with `ast` (nothing is imported or run, TensorFlow is not loaded) and finds:

* the public API: `tf.estimator.X`, `tf.compat.v1.estimator.X`, `tensorflow_estimator.estimator.X`,
  `tf.keras.estimator.model_to_estimator`, through whatever names the module imported them as;
* private modules: `tensorflow_estimator.python.estimator.*` and `tensorflow.python.estimator.*`, and the
  names used from them;
* TensorFlow modules that left with tf.estimator (`tensorflow.python.distribute.estimator_training`);
* tf.estimator 2.15's private `Estimator` members (`_call_model_fn`, `_config`, ...), where a file that uses
  tf.estimator calls one, or an Estimator subclass overrides or reads one.

Names are followed through what a module binds: an assignment of an imported path (`tf = tf.compat.v1`,
`tf_estimator = tf.estimator`), and, across the files checked together, another module's names (AdaNet's
`from adanet import tf_compat` then `tf_compat.v1.estimator.tpu.TPUEstimator`, where `adanet/tf_compat` binds
`v1 = tf.compat.v1`), relative imports included.

Each use is checked against `migrate.surface`, the table `elastimator.compat` serves from.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import os
from typing import Callable, Iterable, Iterator

from elastimator.errors import MissingPathError
from elastimator.migrate import surface

PUBLIC, PRIVATE, REMOVED, MEMBER = "public", "private module", "removed TF module", "Estimator member"


@dataclasses.dataclass(frozen=True)
class Use:
    """One use of tf.estimator's API.

    Attributes:
        path: The source file.
        line: Its line.
        name: What is used, spelled canonically: `tf.estimator.Estimator`,
            `tensorflow_estimator.python.estimator.util.fn_args`, `Estimator._call_model_fn`.
        kind: PUBLIC, PRIVATE, REMOVED or MEMBER.
        served: Whether elastimator serves it.
        note: What differs from 2.15, or (not served) why and what to do.
        in_215: False for a name tf.estimator 2.15 did not have either (code written for TensorFlow 1, behind
            a version check): it would fail on 2.15 too, and does not count as unserved.
    """

    path: str
    line: int
    name: str
    kind: str
    served: bool
    note: str = ""
    in_215: bool = True

    @property
    def missing(self) -> bool:
        """A name tf.estimator 2.15 had and elastimator does not serve."""
        return not self.served and self.in_215

    def describe(self) -> str:
        status = "served" if self.served else "NOT SERVED" if self.in_215 else "not in tf.estimator 2.15 either"
        return f"{self.path}:{self.line}: {self.name} ({self.kind}): {status}" + (f"; {self.note}" if self.note else "")


def sources(path: str) -> list[str]:
    """The .py files of `path`: a file, a directory (walked), or the name of an installed package (found
    without importing it)."""
    if os.path.isfile(path):
        return [path]
    if not os.path.isdir(path):
        spec = importlib.util.find_spec(path) if path.replace(".", "").replace("_", "").isalnum() else None
        if spec is None or not (spec.submodule_search_locations or spec.origin):
            raise MissingPathError(f"{path!r} is neither a file, a directory, nor an installed package. Pass "
                                    f"a source tree, a .py file or an importable package name.")
        if not spec.submodule_search_locations:
            return [spec.origin]
        path = list(spec.submodule_search_locations)[0]
    found = []
    for folder, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        found += [os.path.join(folder, f) for f in sorted(files) if f.endswith(".py")]
    return found


@dataclasses.dataclass(frozen=True)
class Checked:
    """What `check_sources` found: the uses, in file and line order, and how many files it read."""

    uses: list[Use]
    files_read: int


def check_sources(paths: Iterable[str], progress: Callable[[int, int], None] | None = None) -> Checked:
    """Every use in every file under `paths`, in file and line order, names followed through the modules checked
    together (see the module docstring); `progress(done, total)` after each file is read (a terminal's line)."""
    files = [source for path in paths for source in sources(path)]
    trees: dict[str, ast.AST | None] = {}
    for done, source in enumerate(files, 1):
        trees[source] = _parse(source)
        if progress is not None:
            progress(done, len(files))
    exports: dict[str, dict[str, str]] = {}
    for source, tree in trees.items():  # first pass: what each module binds
        if tree is not None:
            scanner = _Scanner(source, _module_name(source), {})
            scanner.scan(tree)
            exports[scanner.module] = scanner.aliases
    uses: list[Use] = []
    for source, tree in trees.items():
        if tree is not None:
            uses += _sorted(_Scanner(source, _module_name(source), exports).scan(tree))
    return Checked(uses, len(files))


def check_paths(paths: Iterable[str]) -> list[Use]:
    """Every use in every file under `paths`, in file and line order (`check_sources`)."""
    return check_sources(paths).uses


def check_file(path: str) -> list[Use]:
    """The uses in one file (none when it does not parse as Python 3)."""
    tree = _parse(path)
    return [] if tree is None else _sorted(_Scanner(path, _module_name(path), {}).scan(tree))


def _parse(path: str) -> ast.AST | None:
    """A file's syntax tree; None where it does not parse as Python 3, or names neither `estimator` nor
    `tensorflow`: every use names the one, and every alias a use goes through is bound from the other."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    if "estimator" not in text and "tensorflow" not in text:
        return None
    try:
        return ast.parse(text, filename=path)
    except (SyntaxError, ValueError):
        return None


def _sorted(uses: list[Use]) -> list[Use]:
    return sorted(set(uses), key=lambda u: (u.line, u.name))


def _module_name(path: str) -> str:
    """The dotted name a file imports as, from the packages (folders with `__init__.py`) it is in."""
    folder, name = os.path.split(os.path.abspath(path))
    parts = [] if name == "__init__.py" else [name.removesuffix(".py")]
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        folder, package = os.path.split(folder)
        parts.insert(0, package)
    return ".".join(parts)


def _classify(dotted: str) -> tuple[str, str, bool, str] | None:
    """(canonical name, kind, served, note) for a dotted path, or None when it is not tf.estimator's. A note
    of NOT_IN_215 marks a name 2.15 did not have."""
    parts = dotted.split(".")
    if parts[0] not in ("tensorflow", "tensorflow_estimator"):
        return None
    relative = surface.private_module(dotted)
    if relative is not None:
        components = relative.split(".") if relative else []
        for cut in range(len(components), -1, -1):  # the longest served module the path is in
            module = ".".join(components[:cut])
            if module in surface.PRIVATE:
                if cut == len(components):
                    return (_canonical(module), PRIVATE, True, "")
                return _private(module, components[cut])
        return (_canonical(relative), PRIVATE, False, "elastimator does not serve this private module")
    for module, names in surface.REMOVED_TF_MODULES.items():
        if dotted == module:
            return (module, REMOVED, True, "")
        if dotted.startswith(module + "."):
            name = dotted[len(module) + 1:].split(".")[0]
            return (f"{module}.{name}", REMOVED, name in names, "" if name in names else _UNLISTED)
    return _public(parts)


NOT_IN_215 = "a name of an older tf.estimator, gone by 2.15"
_UNLISTED = "not among the names elastimator serves of this module (see elastimator/migrate/surface.py)"


def _canonical(module: str) -> str:
    """A private module's name under tensorflow_estimator, however the code spelled its root."""
    return f"{surface.PRIVATE_ROOTS[1]}.{module}" if module else surface.PRIVATE_ROOTS[1]


def _private(module: str, name: str):
    canonical = f"{_canonical(module)}.{name}"
    served = surface.PRIVATE[module].get(name)
    if served is None and f"{module}.{name}" in surface.PRIVATE:  # a submodule, reached as an attribute
        return (canonical, PRIVATE, True, "")
    if served is None:
        return (canonical, PRIVATE, False, surface.PRIVATE_NOT_SERVED.get(f"{module}.{name}", _UNLISTED))
    return (canonical, PRIVATE, True, served.differs)


def _public(parts: list[str]):
    """`tensorflow[.compat.vN]*.estimator...`, `tensorflow_estimator[.compat.vN]*.estimator...`,
    `tensorflow.keras.estimator...`."""
    rest, v1 = parts[1:], False
    while rest[:1] == ["compat"] and len(rest) >= 2 and rest[1] in ("v1", "v2"):
        v1 = rest[1] == "v1"
        rest = rest[2:]
    if rest[:2] == ["keras", "estimator"]:
        name = ".".join(rest[2:3])
        if not name:
            return ("tf.keras.estimator", PUBLIC, True, "")
        return (f"tf.keras.estimator.{name}", PUBLIC, name == "model_to_estimator",
                "" if name == "model_to_estimator" else NOT_IN_215)
    if rest[:1] != ["estimator"]:
        return None
    space = "tf.compat.v1.estimator" if v1 else "tf.estimator"
    if len(rest) == 1:
        return (space, PUBLIC, True, "")
    name = rest[1]
    if name not in surface.PUBLIC or (name in surface.V1_ONLY and not v1 and parts[0] == "tensorflow"):
        return (f"{space}.{name}", PUBLIC, False, NOT_IN_215)
    if name in surface.SUBMODULES and len(rest) > 2:  # tf.estimator.export.PredictOutput, ...
        inner = rest[2]
        served = inner in surface.SUBMODULES[name]
        return (f"{space}.{name}.{inner}", PUBLIC, served, "" if served else NOT_IN_215)
    return (f"{space}.{name}", PUBLIC, True, "")


class _Scanner(ast.NodeVisitor):
    """Finds the uses in one module: imports, attribute chains on imported names, Estimator members."""

    def __init__(self, path: str, module: str = "", exports: dict[str, dict[str, str]] | None = None):
        self.path = path
        self.module = module
        """The dotted name of the file's module ("" when unknown), for its relative imports."""
        self.exports = exports or {}
        """Module name -> the aliases that module binds (other files checked together)."""
        self.aliases: dict[str, str] = {}
        """Local name -> the dotted path it was imported as, or assigned from."""
        self.uses: list[Use] = []
        self.uses_estimator = False
        self.estimator_classes: list[bool] = []
        """For each class being visited, whether it derives from an Estimator."""

    def scan(self, tree: ast.AST) -> list[Use]:
        self.visit(tree)
        if not self.uses_estimator:
            return [u for u in self.uses if u.kind != MEMBER]
        return self.uses

    def _add(self, node: ast.AST, dotted: str) -> bool:
        found = _classify(dotted)
        if found is None:
            return False
        name, kind, served, note = found
        self.uses.append(Use(self.path, node.lineno, name, kind, served, note, in_215=note != NOT_IN_215))
        self.uses_estimator = True
        return True

    def _through(self, dotted: str) -> str:
        """`dotted` with a leading path another checked module binds replaced by what it binds, repeatedly
        (`adanet.tf_compat.v1.estimator` -> `tensorflow.compat.v1.estimator`)."""
        for _ in range(8):  # a chain of re-exports; bounded, so a module binding itself cannot loop
            parts = dotted.split(".")
            for cut in range(len(parts) - 1, 0, -1):
                bound = self.exports.get(".".join(parts[:cut]), {}).get(parts[cut])
                if bound is not None:
                    dotted = ".".join([bound, *parts[cut + 1:]])
                    break
            else:
                return dotted
        return dotted

    def _dotted(self, node: ast.AST) -> str | None:
        """The dotted path an expression `a.b.c` names through the module's aliases, or None."""
        chain = _chain(node)
        if chain is None or chain[0] not in self.aliases:
            return None
        return self._through(".".join([self.aliases[chain[0]], *chain[1:]]))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                self.aliases.setdefault(alias.name.split(".")[0], alias.name.split(".")[0])
            if alias.name.count(".") and _classify(alias.name) is not None and "estimator" in alias.name:
                self._add(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module
        if node.level:  # relative: from the file's own package
            package = self.module.split(".") if self.module else []
            if not self.path.endswith("__init__.py"):
                package = package[:-1]
            if not self.module or node.level - 1 > len(package):
                return
            module = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
        if not module:
            return
        for alias in node.names:
            dotted = f"{module}.{alias.name}"
            self.aliases[alias.asname or alias.name] = dotted
            dotted = self._through(dotted)
            if "estimator" in dotted and _classify(dotted) is not None:
                self._add(node, dotted)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            dotted = self._dotted(node.value)
            if dotted is not None and dotted.split(".")[0] in ("tensorflow", "tensorflow_estimator"):
                self.aliases[node.targets[0].id] = dotted  # `tf = tf.compat.v1`, `tf_estimator = tf.estimator`

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = self._dotted(node)
        if dotted is not None and "estimator" in dotted and self._add(node, dotted):
            return  # the longest chain was classified; its prefixes are the same use
        self._member(node, node.attr, node.value)
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        derives = any("Estimator" in ast.unparse(base) or "estimator" in ast.unparse(base) for base in node.bases)
        self.estimator_classes.append(derives)
        for statement in node.body:
            if derives and isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._member(statement, statement.name, None, overrides=True)
        self.generic_visit(node)
        self.estimator_classes.pop()

    def _member(self, node: ast.AST, name: str, receiver: ast.AST | None, overrides: bool = False) -> None:
        """An Estimator member, where it is plainly an Estimator's: overridden or used through `self` (or
        `super()`) in an Estimator subclass, or read from a name that says it holds an estimator."""
        if name not in surface.ESTIMATOR_MEMBERS and name not in surface.ESTIMATOR_MEMBERS_NOT_SERVED:
            return
        in_subclass = bool(self.estimator_classes and self.estimator_classes[-1])
        if overrides:
            if not in_subclass:
                return
        else:
            text = ast.unparse(receiver).lower() if receiver is not None else ""
            own = in_subclass and (text == "self" or text.startswith("super("))
            if not (own or any(word in text for word in ("estimator", "ranker"))):
                return
        served = name in surface.ESTIMATOR_MEMBERS
        note = "" if served else surface.ESTIMATOR_MEMBERS_NOT_SERVED[name]
        if served and overrides and name not in _DATA_MEMBERS:
            note = "overridden: elastimator calls it where 2.15 did" if name in _CALLED_BY_ENGINE else \
                "overridden: elastimator's engine does not call it"
        self.uses.append(Use(self.path, node.lineno, f"Estimator.{name}", MEMBER, served, note))


_DATA_MEMBERS = frozenset({"_config", "_model_dir", "_params", "_model_fn", "_session_config",
                           "_train_distribution", "_eval_distribution", "_device_fn", "_warm_start_settings"})

_CALLED_BY_ENGINE = frozenset({"_call_model_fn"})
"""Private members the engine calls through the Estimator, so a subclass's override takes effect as in 2.15."""


def _chain(node: ast.AST) -> list[str] | None:
    """`a.b.c` as ["a", "b", "c"], or None when it does not start at a name."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(names)]


def by_name(uses: Iterable[Use], project_of=None) -> list[tuple[str, str, bool, set[str]]]:
    """(name, kind, served, projects using it), most projects first; `project_of(path)` names a file's project
    (default: the file itself)."""
    table: dict[str, tuple[str, bool, set[str]]] = {}
    for use in uses:
        kind, served, projects = table.setdefault(use.name, (use.kind, use.served, set()))
        projects.add(project_of(use.path) if project_of else use.path)
    return sorted(((name, kind, served, projects) for name, (kind, served, projects) in table.items()),
                  key=lambda row: (-len(row[3]), row[0]))


def report(uses: list[Use], show_served: bool = True, files_read: int | None = None) -> Iterator[str]:
    """The lines `elastimator check` prints: each use, then a summary."""
    for use in uses:
        if show_served or not use.served:
            yield use.describe()
    unserved = sorted({u.name for u in uses if u.missing})
    files = len({u.path for u in uses})
    read = "" if files_read is None else f" (of {files_read:,} read)"
    yield (f"{len(uses)} uses of tf.estimator's API in {files} files{read}; "
           + ("all served by elastimator." if not unserved else
              f"{len(unserved)} not served: {', '.join(unserved)}."))
