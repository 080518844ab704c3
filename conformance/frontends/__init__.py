"""The ways users start a run and read its verdict.

`cli` (``checkpointspec run|explain|...``), `pytest_plugin` (``pytest
--checkpointer``), `badge` (``--badge``), `summary` (``--summary``, the CI page)
and `explain` (``checkpointspec explain RULE``). They build the run's settings,
hand them to `checkpointspec.conformance.running`, and present what comes back.
"""
