"""Running the kit: which checks exist, running them, and what a run reports.

`registry` says which checks exist (the storage and session suites), `plan`
turns a user's settings into the run (`KitRun`, every usage error raised
there), `runner` runs the run's checks and returns a `KitReport`, `report` turns
that into tables, JSON and JUnit, `levels` says which conformance levels a
report attains, `failures` renders a failed check for a person. The ways users
start a run are in `checkpointspec.conformance.frontends`.
"""
