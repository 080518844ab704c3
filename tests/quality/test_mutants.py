"""bench/mutants.py keeps working: its mutants are single changes that import, and the
kit's verdict on them is read back as killed (with its roots) or survived.

The generator is checked by default (a second or two); checking mutants with the
kit runs whole quick profiles, so that is in the slow tier.
"""

from __future__ import annotations

import ast
import difflib
import importlib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("cosmic_ray", reason="needs the mutation extra (cosmic-ray)")

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _import(path: Path, name: str) -> ModuleType:
    """The module in file ``path``, imported as ``name``."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


mutants = _import(BENCH / "mutants.py", "bench_mutants")  # bench/ is no package

SMALL_MODULE = '''"""A small module."""

from .capabilities import store_capabilities


def bump(n: int = 0) -> int:
    """Add 1 + 1 to n."""
    if n > 0:
        return n + 1
    return 0


def untouched(n: int) -> int:
    return n - 1
'''


def _changed_lines(original: str, mutated: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(original.splitlines(), mutated.splitlines(), n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def test_small_function_mutants_change_one_line_of_its_body(tmp_path: Path) -> None:
    source = tmp_path / "small.py"
    source.write_text(SMALL_MODULE, encoding="utf-8")
    subject = mutants.Subject(source, "checkpointspec.backends", ("bump",))
    original = mutants.absolute_imports(SMALL_MODULE, subject.package)
    assert "from checkpointspec.backends.capabilities import store_capabilities" in original

    generated = mutants.generate(subject)

    assert generated.mutants, "no mutant of bump"
    for mutant in generated.mutants:
        changed = _changed_lines(original, mutant.source)
        assert len(changed) == 2, mutant.diff  # one line out, one line in
        assert mutant.function == "bump"
        assert changed[0].strip("- ") in ("if n > 0:", "return n + 1", "return 0"), mutant.diff
        mutants.write_module(mutant, tmp_path)
        module = _import(tmp_path / f"{mutant.name}.py", f"small_{mutant.name}")
        assert module.untouched(1) == 0
    assert len({mutant.source for mutant in generated.mutants}) == len(generated.mutants)


def test_memory_mutants_import_with_their_factory(tmp_path: Path) -> None:
    subject = mutants.SUBJECTS["memory"]
    original = mutants.absolute_imports(subject.path.read_text(encoding="utf-8"), subject.package)

    generated = mutants.generate(subject, ["_check_writable"])

    assert len(generated.mutants) >= 2
    for mutant in generated.mutants:
        assert len(_changed_lines(original, mutant.source)) == 2, mutant.diff
        target = mutants.write_module(mutant, tmp_path)
        assert target == f"{mutant.name}:make"
        module = _import(tmp_path / f"{mutant.name}.py", mutant.name)
        assert callable(module.make)


@pytest.fixture
def fresh_modules() -> Iterator[None]:
    """Modules imported by the test are forgotten afterwards, those it replaced restored."""
    before = dict(sys.modules)
    yield
    for name in set(sys.modules) - set(before):
        del sys.modules[name]
    sys.modules.update(before)


def _import_package_copy(directory: Path, target: str) -> ModuleType:
    """The module of ``target`` (``PACKAGE.MODULE:make``), imported from ``directory``."""
    module_name = target.split(":")[0]
    package = module_name.split(".")[0]
    for name in [name for name in sys.modules if name.split(".")[0] == package]:
        del sys.modules[name]  # a module of the memory subject's mutants has the same name
    return importlib.import_module(module_name)


@pytest.mark.usefixtures("fresh_modules")
def test_sqlite_worker_mutants_are_package_copies_with_only_the_worker_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    subject = mutants.SUBJECTS["sqlite-worker"]
    original = subject.source()
    assert "from .maintenance import Holder, check_writable" in original  # kept in the copy
    assert "from checkpointspec.backends.payloads import Row, gc_paused" in original

    generated = mutants.generate(subject, ["read_log"])

    assert len(generated.mutants) >= 2
    package = subject.path.parent
    for mutant in generated.mutants:
        assert len(_changed_lines(original, mutant.source)) == 2, mutant.diff
        assert mutant.function == "read_log"
        target = mutants.write_module(mutant, tmp_path)
        assert target == f"{mutant.name}.checkpointer:make"
        copy = tmp_path / mutant.name
        assert sorted(path.name for path in copy.glob("*.py")) == sorted(
            path.name for path in package.glob("*.py")
        )
        assert (copy / "worker.py").read_text(encoding="utf-8") == mutant.source
        checkpointer = _import_package_copy(tmp_path, target)
        assert callable(checkpointer.make)
        # The copied checkpointer runs the mutated worker, not the installed one.
        assert Path(checkpointer.worker.__file__) == copy / "worker.py"
        assert checkpointer.Append is checkpointer.worker.Append
        assert checkpointer.maintenance.__name__ == f"{mutant.name}.maintenance"


WORKER_OF_TARGET = """
import sys
from checkpointspec.backends.registry import BackendTarget
factory = BackendTarget.named(sys.argv[1]).factory()
print(sys.modules[factory.__module__].worker.__file__)
"""


def test_a_process_given_the_target_loads_the_mutated_worker(tmp_path: Path) -> None:
    """As the kit and each of its worker processes load a backend: by name, on PYTHONPATH."""
    mutant = mutants.generate(mutants.SUBJECTS["sqlite-worker"], ["read_one"]).mutants[0]
    target = mutants.write_module(mutant, tmp_path)

    loaded = subprocess.run(
        [sys.executable, "-c", WORKER_OF_TARGET, target],
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        cwd=Path(__file__).parent,
        capture_output=True,
        text=True,
        check=True,
    )

    assert Path(loaded.stdout.strip()) == tmp_path / mutant.name / "worker.py"


@pytest.mark.parametrize("name", sorted(mutants.SUBJECTS))
def test_every_subject_function_is_defined_in_its_module(name: str) -> None:
    """A function renamed in the backend would otherwise silently lose its mutants."""
    subject = mutants.SUBJECTS[name]
    tree = ast.parse(subject.path.read_text(encoding="utf-8"))
    defined = {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }

    assert set(subject.functions) <= defined


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The script's JSON output for two mutants of the memory backend's read steps."""
    output = tmp_path_factory.mktemp("mutants") / "mutants.json"
    status = mutants.main(
        [
            *("--function", "read", "--function", "_check_expectations"),
            *("--limit", "2", "--seeds", "1", "--output", str(output)),
        ]
    )
    assert status == 0
    result: dict[str, Any] = json.loads(output.read_text(encoding="utf-8"))
    return result


@pytest.mark.slow
def test_each_mutant_is_killed_or_survives(checked: dict[str, Any]) -> None:
    assert checked["summary"]["checked"] == 2
    for mutant in checked["mutants"]:
        (run,) = mutant["runs"]
        assert mutant["verdict"] in ("killed", "survived"), mutant["reason"]
        if mutant["verdict"] == "killed":
            assert run["exit_status"] == 1
            assert run["roots"], mutant["diff"]
        else:
            assert run["exit_status"] == 0
            assert run["roots"] == []


@pytest.mark.slow
def test_each_killed_mutant_has_one_root(checked: dict[str, Any]) -> None:
    for mutant in checked["mutants"]:
        if mutant["verdict"] == "killed":
            assert len(mutant["roots"]) == 1, (mutant["diff"], mutant["roots"])


def _hand_made(name: str, source: str) -> Any:
    """A mutant of the SQLite worker made by hand rather than by cosmic-ray."""
    subject = mutants.SUBJECTS["sqlite-worker"]
    return mutants.Mutant(subject, name, "read_log", "by hand", 0, 0, source, "")


READ_LOG_ROWS = "    return (row[0] if row else 0), rows\n"


@pytest.mark.slow
def test_a_sqlite_worker_mutant_is_killed_and_an_unchanged_copy_passes(tmp_path: Path) -> None:
    """The kit runs on the copied package as on a user's store, in every process it starts."""
    original = mutants.SUBJECTS["sqlite-worker"].source()
    assert original.count(READ_LOG_ROWS) == 1
    skipping = original.replace(READ_LOG_ROWS, "    return (row[0] if row else 0), rows[1:]\n")

    unchanged = mutants.judge(_hand_made("mutant_unchanged", original), tmp_path, [1])
    killed = mutants.judge(_hand_made("mutant_skips_first_row", skipping), tmp_path, [1])

    assert unchanged.verdict == "survived", (unchanged.reason, unchanged.roots)
    assert killed.verdict == "killed", killed.reason
    assert killed.roots
