"""The kit's face: the check registry, the runner, reports, the CLI and the pytest plugin.

`registry` says which checks exist, `runner` runs a selection against a backend
and returns a `KitReport`, `report` turns that into tables, JSON and JUnit,
`cli` and `pytest_plugin` are the two ways users start a run.
"""
