"""The file reference backend: one directory per store, one log file per session.

`checkpointer` is the backend (its docstring explains layout, locking and
durability); `format` the bytes of a log, `log` one session's files, `naming`
the injective file names of session ids, `integrity` the store inspector.
"""

from .checkpointer import Durability, FileCheckpointer, make

__all__ = ["Durability", "FileCheckpointer", "make"]
