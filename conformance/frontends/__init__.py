"""The ways users start a run and read its verdict.

`cli` (``checkpointspec run|explain|...``), `pytest_plugin` (``pytest
--checkpointer``), `settings` (the run's settings, one table both declare their
flags from, and `run_arguments`, their values as `plan_run`'s arguments), `badge`
(``--badge``), `summary` (``--summary``, the CI page) and `explain`
(``checkpointspec explain RULE``). They build the run
(`checkpointspec.conformance.running.plan.plan_run`) once, hand it to
`checkpointspec.conformance.running`, and present what comes back.
"""
