"""The dependency direction of the code, checked on every import statement.

``spec ← backends ← reference ← conformance``: a package imports only itself and
the packages to its left. ``spec``, the contract, imports nothing but the
standard library and msgspec, and never imports dynamically. Inside the kit,
``engines ← checks ← running ← frontends``: engines import neither checks nor
what runs them, checks import neither the runner nor the front ends (CLI, pytest
plugin, badge, summary), the runner does not import the front ends, and none
of them imports the package's own facade (``checkpointspec.conformance``, which
re-exports the runner).

The scanner reads every module of the four packages with `ast`: imports at any
depth (inside functions and ``TYPE_CHECKING`` blocks too), relative ones
resolved to absolute names. Each rule's test has a companion that runs the
same scan on a sample source breaking it, so a scanner that stopped seeing
imports fails as well.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

REPO = Path(__file__).resolve().parent.parent
ROOT = "checkpointspec"
PACKAGES = ("spec", "backends", "reference", "conformance")
"""The packages in dependency order: each may import those before it."""
KIT_LAYERS = ("engines", "checks", "running", "frontends")
"""The kit's layers in dependency order; anything else in the kit is its facade, above all."""
ENGINE_FOLDERS = (
    "contract",
    "target",
    "search",
    "run",
    "history",
    "processes",
    "machines",
    "crash",
    "network",
)
"""The engines' folders in dependency order (the table in ``conformance/engines/__init__.py``)."""
ENGINES = f"{ROOT}.conformance.engines"
SPEC_MAY_IMPORT = frozenset({"msgspec"}) | sys.stdlib_module_names


class Import(NamedTuple):
    """One imported name, made absolute, and where it is imported."""

    module: str
    target: str
    line: int


class Module(NamedTuple):
    name: str
    imports: tuple[Import, ...]
    dynamic: tuple[int, ...]
    """Lines calling ``__import__`` or ``import_module``."""


# -- the scanner ------------------------------------------------------------------------


def module_name(path: Path, root: Path = REPO) -> str:
    """``spec/model.py`` is ``checkpointspec.spec.model``; a package's ``__init__.py`` is the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([ROOT, *parts])


def _absolute(package: str, level: int, name: str | None) -> str:
    """The absolute name of ``from {'.' * level}{name} import ...`` inside ``package``."""
    if level == 0:
        return name or ""
    parts = package.split(".")
    if level - 1 >= len(parts):
        return "." * level + (name or "")  # climbs out of the tree: left relative, never valid
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{name}" if name else base


def scan(source: str, name: str, *, is_package: bool = False) -> Module:
    """Every import of the module ``name`` whose code is ``source``."""
    package = name if is_package else name.rpartition(".")[0]
    found: list[Import] = []
    dynamic: list[int] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [Import(name, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.module is None:
                # ``from . import x``: x may be a module, so each name is a target.
                found += [
                    Import(name, _absolute(package, node.level, a.name), node.lineno)
                    for a in node.names
                ]
            else:
                found.append(Import(name, _absolute(package, node.level, node.module), node.lineno))
        elif isinstance(node, ast.Call):
            called = node.func
            called_name = getattr(called, "id", None) or getattr(called, "attr", None)
            if called_name in {"__import__", "import_module"}:
                dynamic.append(node.lineno)
    return Module(name, tuple(sorted(found, key=lambda imp: imp.line)), tuple(sorted(dynamic)))


def scan_file(path: Path, root: Path = REPO) -> Module:
    return scan(
        path.read_text(encoding="utf-8"),
        module_name(path, root),
        is_package=path.name == "__init__.py",
    )


def package_of(name: str) -> str | None:
    """Which of our packages ``name`` is in ('?' for an unknown one); None outside ours."""
    if name.startswith("."):
        return "?"
    parts = name.split(".")
    if parts[0] != ROOT:
        return None
    return parts[1] if len(parts) > 1 and parts[1] in PACKAGES else "?"


def kit_rank(name: str) -> int:
    """0 engines, 1 checks, 2 running, 3 frontends, 4 anything else in the kit (its facade)."""
    parts = name.split(".")
    if len(parts) > 2 and parts[2] in KIT_LAYERS:
        return KIT_LAYERS.index(parts[2])
    return len(KIT_LAYERS)


def direction_violations(module: Module) -> list[str]:
    """Imports of a package to the right of the module's own, or of no known package."""
    own = package_of(module.name)
    assert own in PACKAGES, module.name
    found = []
    for imp in module.imports:
        target = package_of(imp.target)
        if target is None:
            continue
        if target == "?" or PACKAGES.index(target) > PACKAGES.index(own):
            found.append(f"{imp.module}:{imp.line} imports {imp.target}")
    return found


def purity_violations(module: Module) -> list[str]:
    """Imports of anything but spec itself, the standard library and msgspec."""
    return [
        f"{imp.module}:{imp.line} imports {imp.target}"
        for imp in module.imports
        if package_of(imp.target) != "spec"
        and (imp.target.startswith(".") or imp.target.split(".")[0] not in SPEC_MAY_IMPORT)
    ] + [f"{module.name}:{line} imports dynamically" for line in module.dynamic]


def kit_violations(module: Module) -> list[str]:
    """Imports of a kit layer above the module's own."""
    if package_of(module.name) != "conformance":
        return []
    own = kit_rank(module.name)
    return [
        f"{imp.module}:{imp.line} imports {imp.target}"
        for imp in module.imports
        if package_of(imp.target) == "conformance" and kit_rank(imp.target) > own
    ]


def engine_folder(name: str) -> str | None:
    """The engines' folder ``name`` is in: '' for the package itself, '?' for a loose module."""
    if name == ENGINES:
        return ""
    if not name.startswith(ENGINES + "."):
        return None
    folder = name.split(".")[3]
    return folder if folder in ENGINE_FOLDERS else "?"


def engine_violations(module: Module) -> list[str]:
    """Imports of an engines folder after the module's own, and modules in no folder."""
    own = engine_folder(module.name)
    if own is None or own == "":
        return []
    if own == "?":
        return [f"{module.name} is in none of the engines' folders"]
    rank = ENGINE_FOLDERS.index(own)
    found = []
    for imp in module.imports:
        target = engine_folder(imp.target)
        if target is None:
            continue
        if target in {"", "?"} or ENGINE_FOLDERS.index(target) > rank:
            found.append(f"{imp.module}:{imp.line} imports {imp.target}")
    return found


# -- the tree --------------------------------------------------------------------------------


def _files(package: str) -> list[Path]:
    return sorted(p for p in (REPO / package).rglob("*.py") if "__pycache__" not in p.parts)


MODULES = {m.name: m for package in PACKAGES for m in map(scan_file, _files(package))}


def _of(package: str) -> list[Module]:
    return [m for m in MODULES.values() if package_of(m.name) == package]


@pytest.mark.parametrize("package", PACKAGES)
def test_the_scan_covers_every_installed_module(package: str) -> None:
    installed = importlib.import_module(f"{ROOT}.{package}")
    # Walking imports each subpackage; one that needs an optional extra (the postgres
    # backend needs psycopg) cannot be walked without it, so the comparison cannot be made.
    needs_extra: list[str] = []

    def unimportable(name: str) -> None:
        missing = sys.exc_info()[1]
        if isinstance(missing, ModuleNotFoundError) and package_of(missing.name or ROOT) is None:
            needs_extra.append(f"{name} needs {missing.name}")
            return
        raise  # our own code failing to import is a failure, not a skip

    walked = {installed.__name__} | {
        info.name
        for info in pkgutil.walk_packages(
            installed.__path__, f"{installed.__name__}.", onerror=unimportable
        )
    }
    if needs_extra:
        pytest.skip(f"an optional extra is not installed: {'; '.join(needs_extra)}")
    assert walked == {m.name for m in _of(package)}


def test_every_import_follows_the_dependency_direction() -> None:
    assert [v for m in MODULES.values() for v in direction_violations(m)] == []


def test_spec_imports_only_the_standard_library_and_msgspec() -> None:
    assert [v for m in _of("spec") for v in purity_violations(m)] == []


def test_the_kit_layers_import_only_downwards() -> None:
    layers = {kit_rank(m.name) for m in _of("conformance")}
    assert layers == set(range(len(KIT_LAYERS) + 1)), "every layer has modules"
    assert [v for m in _of("conformance") for v in kit_violations(m)] == []


def test_the_engines_folders_import_only_downwards() -> None:
    folders = {engine_folder(m.name) for m in _of("conformance")} - {None, ""}
    assert folders == set(ENGINE_FOLDERS), "every folder has modules, none is loose"
    assert [v for m in _of("conformance") for v in engine_violations(m)] == []


# -- the scanner sees what breaks each rule -------------------------------------------------


def test_relative_imports_resolve_to_absolute_names() -> None:
    source = (
        "from . import events\n"
        "from .errors import CheckpointError\n"
        "from .. import backends\n"
        "from ..conformance.engines import disk\n"
        "from ..... import nowhere\n"
    )
    module = scan(source, "checkpointspec.spec.model")
    assert [imp.target for imp in module.imports] == [
        "checkpointspec.spec.events",
        "checkpointspec.spec.errors",
        "checkpointspec.backends",
        "checkpointspec.conformance.engines",
        ".....nowhere",
    ]
    package = scan("from . import base\n", "checkpointspec.conformance.checks", is_package=True)
    assert [imp.target for imp in package.imports] == ["checkpointspec.conformance.checks.base"]


def test_a_module_name_comes_from_its_path(tmp_path: Path) -> None:
    (tmp_path / "backends" / "file").mkdir(parents=True)
    init, log = tmp_path / "backends/file/__init__.py", tmp_path / "backends/file/log.py"
    init.write_text("from .log import LogFiles\n")
    log.write_text("import os\n")
    assert scan_file(init, tmp_path).imports[0].target == "checkpointspec.backends.file.log"
    assert scan_file(log, tmp_path).name == "checkpointspec.backends.file.log"


def test_imports_against_the_direction_are_found() -> None:
    source = (
        "import os\n"
        "import aiosqlite\n"
        "from ..spec import Capability\n"
        "from . import memory\n"
        "from ..conformance.engines.crash.disk import SimulatedDisk\n"
        "def later():\n"
        "    import checkpointspec.reference.session\n"
        "    from .. import unknown_package\n"
    )
    module = scan(source, "checkpointspec.backends.fsport")
    assert direction_violations(module) == [
        "checkpointspec.backends.fsport:5 imports checkpointspec.conformance.engines.crash.disk",
        "checkpointspec.backends.fsport:7 imports checkpointspec.reference.session",
        "checkpointspec.backends.fsport:8 imports checkpointspec.unknown_package",
    ]


def test_foreign_and_dynamic_imports_in_spec_are_found() -> None:
    source = (
        "import os, msgspec.json\n"
        "from typing import TYPE_CHECKING\n"
        "from . import events\n"
        "from ..backends import memory\n"
        "import aiosqlite\n"
        "if TYPE_CHECKING:\n"
        "    import hypothesis\n"
        "def f():\n"
        "    from checkpointspec.conformance import cli\n"
        "    return importlib.import_module('rich')\n"
    )
    module = scan(source, "checkpointspec.spec.sample")
    assert purity_violations(module) == [
        "checkpointspec.spec.sample:4 imports checkpointspec.backends",
        "checkpointspec.spec.sample:5 imports aiosqlite",
        "checkpointspec.spec.sample:7 imports hypothesis",
        "checkpointspec.spec.sample:9 imports checkpointspec.conformance",
        "checkpointspec.spec.sample:10 imports dynamically",
    ]


@pytest.mark.parametrize(
    ("name", "source", "bad"),
    [
        (
            "checkpointspec.conformance.engines.contract.outcomes",
            "from ...checks import base\n",
            True,
        ),
        (
            "checkpointspec.conformance.engines.contract.outcomes",
            "from ...running.runner import run_kit\n",
            True,
        ),
        ("checkpointspec.conformance.engines.contract.outcomes", "from ... import run_kit\n", True),
        (
            "checkpointspec.conformance.engines.contract.outcomes",
            "from .violations import RuleViolation\n",
            False,
        ),
        (
            "checkpointspec.conformance.engines.machines.storage",
            "from ...checks import base\n",
            True,
        ),
        (
            "checkpointspec.conformance.engines.machines.storage",
            "from ..crash.disk import SimulatedDisk\n",
            False,
        ),
        ("checkpointspec.conformance.checks.reading", "from ..running import registry\n", True),
        ("checkpointspec.conformance.checks.reading", "from ..engines import outcomes\n", False),
        ("checkpointspec.conformance.running.runner", "from ..checks.base import Check\n", False),
        ("checkpointspec.conformance.running.runner", "from ..frontends import cli\n", True),
        ("checkpointspec.conformance.running.runner", "import checkpointspec.conformance\n", True),
        (
            "checkpointspec.conformance.frontends.cli",
            "from ...running.runner import run_kit\n",
            False,
        ),
        ("checkpointspec.conformance", "from .running.runner import run_kit\n", False),
    ],
)
def test_imports_up_the_kit_layers_are_found(name: str, source: str, bad: bool) -> None:
    is_package = name == "checkpointspec.conformance"
    assert bool(kit_violations(scan(source, name, is_package=is_package))) is bad


@pytest.mark.parametrize(
    ("name", "source", "bad"),
    [
        (f"{ENGINES}.history.chain", "from ..contract.ledger import Ledger\n", False),
        (f"{ENGINES}.history.chain", "from ..machines.storage import Machine\n", True),
        (f"{ENGINES}.contract.outcomes", "from ..search.budget import Slice\n", True),
        (f"{ENGINES}.crash.holds", "from ..processes.client import WorkerClient\n", False),
        (f"{ENGINES}.processes.client", "from ..crash.stopper import Stopper\n", True),
        (f"{ENGINES}.machines.storage", "from .. import network\n", True),
        (f"{ENGINES}.machines.storage", "from ..run import harness\n", False),
        (f"{ENGINES}.loose", "import os\n", True),
    ],
)
def test_imports_against_the_engines_folder_order_are_found(
    name: str, source: str, bad: bool
) -> None:
    assert bool(engine_violations(scan(source, name))) is bad
