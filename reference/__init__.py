"""The session layer on top of any conforming checkpointer.

Checkpoint listing, restore (files and conversation) and compaction build here on
the `checkpointspec.spec.Checkpointer` contract alone; they import ``spec`` and
``backends`` only.
"""
