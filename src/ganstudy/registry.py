"""Name -> implementation registries for the pluggable parts, filled from Python entry points.

Every part, ganstudy's own as well as a plugin's, is an entry point in the group of its kind (ganstudy's
are in its pyproject.toml, e.g. ``[project.entry-points."ganstudy.networks"]``), or is named in a study as
``module:attribute``. A registry imports a part's module only when a study asks for the part, so the
registries import none of the parts and no part's module has to import another's to be found.
"""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import importlib.util
import inspect
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Generic, TypeVar

from ganstudy.core.code_version import files_sha256
from ganstudy.errors import GanstudyError

T = TypeVar("T")

# The distribution whose entry points are the built-in parts.
OWN_DISTRIBUTION = "ganstudy"


@dataclass(frozen=True)
class Origin:
    """Where a part came from, for provenance and for error messages."""

    reference: str  # module:attribute
    distribution: str | None  # the installed package that declares the entry point (None: module:attribute)
    version: str | None

    def __str__(self) -> str:
        if self.distribution is None:
            return self.reference
        return f"{self.reference} (from {self.distribution} {self.version})"

    def record(self) -> dict[str, str | None]:
        """For provenance: the reference, its package and version, and the sha256 of the source of the
        top-level package (or module) that defines it, so that an edited plugin is told apart from
        the one a result came from even when its version number stayed."""
        return {
            "reference": self.reference,
            "distribution": self.distribution,
            "version": self.version,
            "source_sha256": source_sha256(self.reference.partition(":")[0]),
        }


def source_sha256(module_name: str) -> str | None:
    """sha256 over the .py files (relative path and bytes, in sorted order) of the top-level package of
    an imported module; None for a module without source files."""
    return _package_sha256(module_name.partition(".")[0])


@functools.cache
def _package_sha256(top_name: str) -> str | None:
    # Cached by package: a run's parts mostly share one (ganstudy's own), which is hashed once.
    top = sys.modules.get(top_name)
    if top is None:
        return None
    roots = [Path(path) for path in getattr(top, "__path__", [])]
    files = [(root, file) for root in roots for file in sorted(root.rglob("*.py"))]
    if not roots and getattr(top, "__file__", None):
        files = [(Path(top.__file__).parent, Path(top.__file__))]
    return files_sha256(files) if files else None


def _group(group: str) -> tuple[EntryPoint, ...]:
    # Read each time (6 ms): a registry asks once per part and process, and a plugin installed since
    # the last look is found.
    return tuple(entry_points(group=group))


def _distribution(point: EntryPoint) -> tuple[str | None, str | None]:
    dist = point.dist
    return (dist.name, dist.version) if dist is not None else (None, None)


def resolve(reference: str, what: str) -> object:
    """The object a ``module:attribute`` reference names (the attribute may be dotted), imported now;
    ``what`` names the part in the message when it cannot be."""
    module_name, _, attribute = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a plugin's import may fail in any way; name the plugin either way
        raise GanstudyError(
            f"{what}: module '{module_name}' does not import ({type(exc).__name__}: {exc}); "
            "install its package in the environment the jobs run in"
        ) from exc
    try:
        value = module
        for part in attribute.split("."):
            value = getattr(value, part)
    except AttributeError:
        raise GanstudyError(f"{what}: module '{module_name}' has no attribute '{attribute}'") from None
    return value


def missing_module(reference: str) -> str | None:
    """The module of a ``module:attribute`` reference when it cannot be found, else None. Found without
    running any code (not even its packages' ``__init__``), so that the plan may ask about a part that
    imports torch; a module that is there but fails to import is named when it is imported."""
    name = reference.partition(":")[0]
    if name in sys.modules:
        return None
    parts = name.split(".")
    spec = importlib.util.find_spec(parts[0])
    for depth in range(1, len(parts)):
        if spec is None or spec.submodule_search_locations is None:
            return name
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: depth + 1]), spec.submodule_search_locations)
    return name if spec is None else None


def not_installed(reference: str, what: str) -> str | None:
    """The problem of a part (``what``, e.g. "metric 'kid' (origin)") whose ``module:attribute`` reference
    names a module that is not installed (missing_module); None when it is there."""
    module = missing_module(reference)
    if module is None:
        return None
    return f"{what} names '{reference}', but module '{module}' is not installed: fix its package or install it"


class Registry(Generic[T]):
    """The parts of one kind: the entry points of ``group`` by name, loaded on first use and checked
    with ``check`` (a description of what is wrong with a loaded object, or None). With ``by_reference``
    False a part may not be named as ``module:attribute`` (``why`` says why not)."""

    def __init__(
        self, kind: str, group: str, check: Callable[[object], str | None], by_reference: bool = True, why: str = ""
    ) -> None:
        self.kind = kind
        self.group = group
        self._check = check
        self._by_reference, self._why = by_reference, why
        self._loaded: dict[str, tuple[T, Origin]] = {}

    def names(self) -> list[str]:
        """Every name of the group's entry points (a ``module:attribute`` is found without one)."""
        return sorted({point.name for point in _group(self.group)})

    def get(self, name: str) -> T:
        return self._load(name)[0]

    def origin(self, name: str) -> Origin:
        return self._load(name)[1]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and ((":" in name and self._by_reference) or name in self.names())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def _load(self, name: str) -> tuple[T, Origin]:
        if name not in self._loaded:
            value, origin = self._import(name) if ":" in name else self._from_entry_point(name)
            problem = self._check(value)
            if problem:
                raise GanstudyError(f"{self.kind} '{name}' ({origin}) {problem}; fix it in its package")
            self._loaded[name] = (value, origin)
        return self._loaded[name]

    def _from_entry_point(self, name: str) -> tuple[object, Origin]:
        points = [point for point in _group(self.group) if point.name == name]
        if not points:
            raise GanstudyError(self._unknown(name))
        if len(points) > 1:
            owners = ", ".join(
                f"{point.value} from {_distribution(point)[0] or 'an unknown package'}" for point in points
            )
            raise GanstudyError(
                f"{self.kind} '{name}' is registered {len(points)} times in entry-point group '{self.group}' "
                f"({owners}): uninstall one of those packages or rename its entry point"
            )
        (point,) = points
        distribution, version = _distribution(point)
        origin = Origin(point.value, distribution, version)
        try:
            return point.load(), origin
        except Exception as exc:  # a plugin's import may fail in any way; name the plugin either way
            raise GanstudyError(
                f"{self.kind} '{name}' ({origin}) does not import: {type(exc).__name__}: {exc}; "
                f"fix or reinstall {distribution or 'its package'}"
            ) from exc

    def _import(self, reference: str) -> tuple[object, Origin]:
        if not self._by_reference:
            raise GanstudyError(
                f"{self.kind} '{reference}' is named as module:attribute, but {self._why}: register it as an "
                f"entry point of group '{self.group}' in its package (docs/plugins.md)"
            )
        return resolve(reference, f"{self.kind} '{reference}'"), Origin(reference, None, None)

    def _unknown(self, name: str) -> str:
        known = self.names()
        if not any(_distribution(point)[0] == OWN_DISTRIBUTION for point in _group(self.group)):
            return (
                f"unknown {self.kind} '{name}': ganstudy's own entry points in group '{self.group}' are missing, so "
                "its installed metadata is stale; reinstall it (make setup, or pip install -e .)"
            )
        return (
            f"unknown {self.kind} '{name}'; registered {self.kind}s: {', '.join(known)} (entry-point group "
            f"'{self.group}')" + (", or name one as module:attribute" if self._by_reference else "")
        )


def instance_of(kind: type) -> Callable[[object], str | None]:
    """A check that a loaded part is a ``kind``."""

    def check(value: object) -> str | None:
        return None if isinstance(value, kind) else f"is of type {type(value).__name__}, not {kind.__name__}"

    return check


def keeping(kind: type, **contracts: type) -> Callable[[object], str | None]:
    """A check that a loaded part is a ``kind`` whose fields named in ``contracts`` keep their contract
    (ganstudy.contracts) where they hold a callable; a field that holds a ``module:attribute`` string is
    checked when it is imported (resolve_part), a None one is not there."""

    def check(value: object) -> str | None:
        if not isinstance(value, kind):
            return instance_of(kind)(value)
        problems = [
            f"its {field} {problem}"
            for field, contract in contracts.items()
            if callable(getattr(value, field))
            for problem in contract_problems(getattr(value, field), contract)
        ]
        return "; ".join(problems) or None

    return check


def subclass_of(kind: type) -> Callable[[object], str | None]:
    """A check that a loaded part is a subclass of ``kind`` whose overrides take the arguments of the
    methods they override."""

    def check(value: object) -> str | None:
        if not (isinstance(value, type) and issubclass(value, kind)):
            return f"is {value!r}, not a subclass of {kind.__name__}"
        return "; ".join(contract_problems(value, kind)) or None

    return check


def resolve_part(reference: str, what: str, contract: type) -> object:
    """The part a ``module:attribute`` reference names, imported now and checked against its contract
    (ganstudy.contracts); ``what`` names the part, with its package, in the message."""
    value = resolve(reference, what)
    problems = contract_problems(value, contract)
    if problems:
        raise GanstudyError(f"{what}: '{reference}' {'; '.join(problems)}; fix it in its package")
    return value


def contract_problems(value: object, contract: type) -> list[str]:
    """What ``value`` does not do of ``contract`` (a Protocol of ganstudy.contracts, or a base class whose
    methods a subclass overrides), found by signature without calling anything: a callable contract's
    value must take its arguments; a class contract's value must be a class with its attributes and
    methods, each taking the contract's arguments. Empty: it keeps the contract."""
    members, where = _members(contract), f"{contract.__module__}.{contract.__qualname__}"
    if members == ["__call__"]:
        if not callable(value):
            return [f"is of type {type(value).__name__}, not a callable"]
        problem = _refused(value, contract.__call__, bound=True)
        return [f"{problem} ({where})"] if problem else []
    if not isinstance(value, type):
        return [f"is of type {type(value).__name__}, not a class ({where})"]
    problems = []
    for name in members:
        expected = getattr(contract, name, None)
        if not hasattr(value, name):
            problems.append(f"has no {name} ({where}.{name})")
        elif callable(expected):
            problem = _refused(getattr(value, name), expected, bound=False)
            if problem:
                problems.append(f"{name} {problem} ({where}.{name})")
    return problems


def _members(contract: type) -> list[str]:
    """A contract's public methods and annotated attributes, and of the special methods those a part is
    called through (``__call__``, a class's ``__init__``)."""
    defined = [
        name
        for name, member in vars(contract).items()
        if callable(member)
        and (not name.startswith("_") or (name in ("__call__", "__init__") and not _inherited_init(contract, name)))
    ]
    return defined + [name for name in vars(contract).get("__annotations__", {}) if name not in defined]


def _inherited_init(contract: type, name: str) -> bool:
    # typing gives every Protocol class an __init__ of its own; only one the contract writes counts.
    return name == "__init__" and vars(contract)[name].__qualname__ != f"{contract.__qualname__}.__init__"


def _refused(candidate: object, expected: Callable, bound: bool) -> str | None:
    """How ``candidate`` refuses the positional arguments ``expected`` is called with (None: it takes
    them, or its signature cannot be read). ``bound``: ``candidate`` is called without ``self``."""
    try:
        signature = inspect.signature(candidate)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    names = [
        parameter.name
        for parameter in inspect.signature(expected).parameters.values()
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
    ]
    called = names[1:] if bound else names
    try:
        signature.bind(*called)
    except TypeError:
        takes = ", ".join(str(parameter) for parameter in signature.parameters.values())
        return f"takes ({takes}), but is called as ({', '.join(called)})"
    return None
