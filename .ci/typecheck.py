"""Run mypy --strict over the four packages under their installed names, and the examples.

The source folders map to ``checkpointspec.<name>`` through setuptools'
package-dir, which mypy cannot follow; a throw-away tree of symlinks gives mypy
the same module names the installed package has, with errors pointing at the
real files.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGES = ("spec", "backends", "reference", "conformance")


def main() -> int:
    repo = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "checkpointspec"
        root.mkdir()
        for name in PACKAGES:
            (root / name).symlink_to(repo / name, target_is_directory=True)
        # The example backend imports the package as an author would.
        (Path(tmp) / "examples").symlink_to(repo / "examples", target_is_directory=True)
        args = [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--config-file",
            str(repo / "pyproject.toml"),
        ]
        for name in PACKAGES:
            args += ["-p", f"checkpointspec.{name}"]
        args += ["-p", "examples"]
        return subprocess.run([*args, *sys.argv[1:]], cwd=tmp, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
