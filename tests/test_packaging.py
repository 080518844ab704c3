"""The wheel ships every package of the tree: a folder with an ``__init__.py`` under
``spec/``, ``backends/``, ``reference/`` or ``conformance/`` is listed in
pyproject.toml's ``packages``, and nothing listed is missing.

An editable install finds modules whether or not they are listed, so the
project's own tests would pass while ``pip install .`` shipped a kit without its
CLI; this test is what notices.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _listed() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return set(project["tool"]["setuptools"]["packages"])


def _in_tree() -> set[str]:
    mapping = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    package_dir: dict[str, str] = mapping["tool"]["setuptools"]["package-dir"]
    found: set[str] = set()
    for package, folder in package_dir.items():
        root = REPO / folder
        for init in root.rglob("__init__.py"):
            relative = init.parent.relative_to(root).parts
            found.add(".".join([package, *relative]))
    return found


def test_every_package_in_the_tree_is_shipped() -> None:
    assert sorted(_in_tree() - _listed()) == []


def test_every_shipped_package_is_in_the_tree() -> None:
    assert sorted(_listed() - _in_tree()) == []


def test_every_data_file_of_a_shipped_package_is_package_data() -> None:
    """A file a package reads at run time (a schema, the lite-agent bridge) ships only
    if ``package-data`` names it; the editable install would find it either way."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    package_dir: dict[str, str] = project["tool"]["setuptools"]["package-dir"]
    package_data: dict[str, list[str]] = project["tool"]["setuptools"]["package-data"]
    unlisted = []
    for package in _listed():
        top, *rest = package.split(".")[1:]
        folder = REPO / package_dir[f"checkpointspec.{top}"] / Path(*rest)
        patterns = package_data.get(package, [])
        for file in folder.iterdir():
            data = file.is_file() and file.suffix not in (".py", ".pyc")
            if data and not any(file.match(p) for p in patterns):
                unlisted.append(f"{package}: {file.name}")
    assert unlisted == []
