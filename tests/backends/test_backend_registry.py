"""Naming and opening a backend (`checkpointspec.backends.registry`).

Every way naming a backend can go wrong is one `BackendLoadError` with a
one-line message; the messages are pinned here exactly, since the kit, the
operator commands and the stdio server all print them as they are. Backend
modules are written to a temporary folder on ``sys.path``, each under a name of
its own, and dropped from ``sys.modules`` afterwards.
"""

from __future__ import annotations

import asyncio
import importlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from checkpointspec.backends.memory import MemoryCheckpointer
from checkpointspec.backends.registry import (
    BUILTIN_BACKENDS,
    CHECKPOINTER_MEMBERS,
    STDIO_FACTORY,
    BackendLoadError,
    BackendOptionError,
    BackendRef,
    FactoryFailedError,
    MissingAttributeError,
    ModuleImportError,
    NotACheckpointerError,
    NotCallableError,
    UnknownBackendError,
    import_object,
    load_factory,
    open_backend,
    parse_options,
    process_backend,
    resolve_backend,
)
from checkpointspec.spec import BackendContext, Checkpointer

WriteModule = Callable[[str, str], Path]


@pytest.fixture
def write_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WriteModule]:
    """Write ``NAME.py`` with the given source, importable until the test ends."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written: list[str] = []

    def write(name: str, source: str) -> Path:
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        written.append(name)
        return path

    yield write
    for name in written:
        sys.modules.pop(name, None)


def _one_line(error: BaseException) -> str:
    message = str(error)
    assert "\n" not in message, message
    return message


# -- built-in names ------------------------------------------------------------------------


def test_the_built_in_backends_are_named_by_one_table() -> None:
    assert dict(BUILTIN_BACKENDS) == {
        "memory": "checkpointspec.backends.memory:make",
        "file": "checkpointspec.backends.file:make",
        "sqlite": "checkpointspec.backends.sqlite:make",
        "postgres": "checkpointspec.backends.postgres:make",
    }
    for name, target in BUILTIN_BACKENDS.items():
        assert resolve_backend(name) == BackendRef(name, target)


@pytest.mark.parametrize("name", ["memory", "file", "sqlite"])
def test_a_built_in_backend_opens_a_checkpointer(name: str, tmp_path: Path) -> None:
    async def opened() -> list[str]:
        cp = await open_backend(resolve_backend(name).load(), BackendContext(path=tmp_path))
        try:
            return [s.id for s in await cp.list_sessions()]
        finally:
            await cp.close()

    assert asyncio.run(opened()) == []


def test_a_module_function_is_its_own_target() -> None:
    assert resolve_backend("mypkg.backend:make") == BackendRef(
        "mypkg.backend:make", "mypkg.backend:make"
    )


@pytest.mark.parametrize("name", ["nope", "mypkg.backend", "mypkg.backend:", ":make"])
def test_an_unknown_name_is_refused_listing_the_built_in_ones(name: str) -> None:
    with pytest.raises(UnknownBackendError) as caught:
        resolve_backend(name)
    assert _one_line(caught.value) == (
        f"unknown backend {name!r}: use one of file, memory, postgres, sqlite or module:function"
    )
    assert caught.value.name == name


# -- importing: each failure, one line -----------------------------------------------------


def test_a_module_not_on_the_path_is_named() -> None:
    with pytest.raises(ModuleImportError) as caught:
        load_factory("no_such_module_xyz:make")
    assert _one_line(caught.value) == (
        "cannot import 'no_such_module_xyz': No module named 'no_such_module_xyz'"
    )
    assert caught.value.module == "no_such_module_xyz"


def test_a_missing_package_says_to_check_the_path() -> None:
    with pytest.raises(ModuleImportError) as caught:
        load_factory("no_such_package_xyz.backend:make")
    assert _one_line(caught.value) == (
        "cannot import 'no_such_package_xyz.backend': no package 'no_such_package_xyz' "
        "(is its folder on PYTHONPATH?)"
    )


def test_a_syntax_error_names_the_file_and_line(write_module: WriteModule) -> None:
    path = write_module("registry_case_syntax", "import os\ndef make(ctx)\n    pass\n")
    with pytest.raises(ModuleImportError) as caught:
        load_factory("registry_case_syntax:make")
    assert _one_line(caught.value) == (
        f"cannot import 'registry_case_syntax': {path}:2: SyntaxError: expected ':'"
    )


def test_an_error_on_import_names_the_authors_own_line(write_module: WriteModule) -> None:
    source = "import json\n\nSETTINGS = json.loads('not json')\n"
    path = write_module("registry_case_raises", source)
    with pytest.raises(ModuleImportError) as caught:
        load_factory("registry_case_raises:make")
    # The line of the module, not json/decoder.py's where the error was raised.
    assert _one_line(caught.value) == (
        f"cannot import 'registry_case_raises': {path}:3: "
        "JSONDecodeError: Expecting value: line 1 column 1 (char 0)"
    )
    assert isinstance(caught.value.__cause__, ValueError)


def test_a_missing_name_is_named_with_its_module(write_module: WriteModule) -> None:
    write_module("registry_case_names", "class Backend:\n    pass\nVALUE = 1\n")
    with pytest.raises(MissingAttributeError) as caught:
        load_factory("registry_case_names:make")
    assert _one_line(caught.value) == "'registry_case_names' has no attribute 'make'"
    with pytest.raises(MissingAttributeError) as caught:
        load_factory("registry_case_names:Backend.make")
    assert _one_line(caught.value) == "'registry_case_names' has no attribute 'Backend.make'"
    assert (caught.value.module, caught.value.attribute) == ("registry_case_names", "Backend.make")


def test_something_that_cannot_be_called_is_no_factory(write_module: WriteModule) -> None:
    write_module("registry_case_value", "VALUE = 1\n")
    with pytest.raises(NotCallableError) as caught:
        load_factory("registry_case_value:VALUE")
    assert _one_line(caught.value) == "registry_case_value:VALUE is not callable"


def test_import_object_takes_a_bare_module_or_a_dotted_name(write_module: WriteModule) -> None:
    write_module("registry_case_object", "class Layer:\n    class Inner:\n        x = 1\n")
    module = import_object("registry_case_object")
    assert module is sys.modules["registry_case_object"]
    assert import_object("registry_case_object:Layer.Inner.x") == 1


def test_every_error_is_a_backend_load_error() -> None:
    for error in (
        UnknownBackendError,
        ModuleImportError,
        MissingAttributeError,
        NotCallableError,
        NotACheckpointerError,
        FactoryFailedError,
        BackendOptionError,
    ):
        assert issubclass(error, BackendLoadError)


# -- the cache -----------------------------------------------------------------------------

COUNTING = """\
from pathlib import Path

_runs = Path(__file__).with_suffix(".runs")
_runs.write_text(_runs.read_text() + "x" if _runs.exists() else "x")

def make(ctx):
    raise AssertionError("not called")
"""


def test_a_factory_module_is_imported_once_per_process(write_module: WriteModule) -> None:
    path = write_module("registry_case_counted", COUNTING)
    first = load_factory("registry_case_counted:make")
    again = BackendRef("counted", "registry_case_counted:make").load()
    assert again is first
    assert path.with_suffix(".runs").read_text() == "x"  # the module ran once


def test_a_module_python_dropped_is_imported_afresh(write_module: WriteModule) -> None:
    path = write_module("registry_case_dropped", COUNTING)
    first = load_factory("registry_case_dropped:make")
    del sys.modules["registry_case_dropped"]
    again = load_factory("registry_case_dropped:make")
    assert again is not first
    assert path.with_suffix(".runs").read_text() == "xx"


def test_a_failed_import_is_not_remembered(write_module: WriteModule) -> None:
    write_module("registry_case_fixed", "def make(ctx)\n")
    with pytest.raises(ModuleImportError):
        load_factory("registry_case_fixed:make")
    write_module("registry_case_fixed", "def make(ctx):\n    return None\n")
    importlib.invalidate_caches()
    assert callable(load_factory("registry_case_fixed:make"))


# -- opening a handle ----------------------------------------------------------------------


def returns_none(ctx: BackendContext) -> None:
    return None


async def opens_memory(ctx: BackendContext) -> MemoryCheckpointer:
    return MemoryCheckpointer()


def test_the_members_are_the_protocols() -> None:
    assert set(CHECKPOINTER_MEMBERS) == {
        name for name in vars(Checkpointer) if not name.startswith("_")
    }
    # Operations first, in the protocol's order, then the attributes.
    assert CHECKPOINTER_MEMBERS[:2] == ("append", "read")
    assert CHECKPOINTER_MEMBERS[-1] == "capabilities"
    assert "delete" in CHECKPOINTER_MEMBERS


def test_a_factory_returning_something_else_is_refused_naming_every_missing_member(
    tmp_path: Path,
) -> None:
    with pytest.raises(NotACheckpointerError) as caught:
        asyncio.run(open_backend(returns_none, BackendContext(path=tmp_path)))
    assert _one_line(caught.value) == (
        f"the factory {__name__}:returns_none returned NoneType, which is not a Checkpointer: "
        "it lacks append, read, head, list_sessions, delete, truncate, check_integrity, "
        "close, capabilities"
    )
    assert caught.value.missing == CHECKPOINTER_MEMBERS
    assert isinstance(caught.value, TypeError)


def test_a_failing_factory_is_one_line_ending_with_what_went_wrong() -> None:
    crash = RuntimeError("the child exited\nTraceback (most recent call last):\nValueError: bad")
    failed = FactoryFailedError("mod:make", crash)
    assert _one_line(failed) == (
        "the factory mod:make failed: RuntimeError: the child exited ... ValueError: bad"
    )
    assert failed.error is crash
    assert str(FactoryFailedError("mod:make", OSError("no disk"))) == (
        "the factory mod:make failed: OSError: no disk"
    )


def test_an_async_factory_is_awaited(tmp_path: Path) -> None:
    async def opened() -> Checkpointer:
        cp = await open_backend(opens_memory, BackendContext(path=tmp_path))
        await cp.close()
        return cp

    assert isinstance(asyncio.run(opened()), MemoryCheckpointer)


# -- options and --process -----------------------------------------------------------------


def test_options_are_key_value_pairs() -> None:
    assert parse_options(["a=1", "b=", "c=x=y"]) == {"a": "1", "b": "", "c": "x=y"}
    for bad in ("a", "=1"):
        with pytest.raises(BackendOptionError) as caught:
            parse_options([bad])
        assert _one_line(caught.value) == f"option {bad!r} is not KEY=VALUE"


def test_a_process_backend_is_named_by_its_command() -> None:
    backend, options = process_backend("node b.js", validate=True)
    assert backend == BackendRef("--process 'node b.js' --validate-protocol", STDIO_FACTORY)
    assert options == {"process": "node b.js", "validate_protocol": "1"}
    assert process_backend("node b.js")[1] == {"process": "node b.js"}


@pytest.mark.parametrize(
    ("command", "said"),
    [
        ("  ", "--process needs a command, e.g. --process 'node my-backend.js'"),
        ("node 'b.js", '--process "node \'b.js": No closing quotation'),
    ],
)
def test_a_process_command_that_cannot_run_is_refused(command: str, said: str) -> None:
    with pytest.raises(BackendOptionError) as caught:
        process_backend(command)
    assert _one_line(caught.value) == said


# -- the stdio server names backends the same way ------------------------------------------


def test_the_stdio_server_refuses_an_unknown_backend_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "checkpointspec.backends.stdio.serve", "no_such_module_xyz:make"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1
    assert done.stderr == (
        "serve: cannot import 'no_such_module_xyz': No module named 'no_such_module_xyz'\n"
    )
