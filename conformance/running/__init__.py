"""Running the kit: which checks exist, running them, and what a run reports.

`registry` says which checks exist (the storage and session suites), `plan`
turns a user's settings into the run (`KitRun`, every usage error raised
there), `runner` runs the run's checks and returns a `KitReport`, `report` turns
that into tables, JSON and JUnit, `levels` says which conformance levels a
report attains, `findings` makes a check's findings (`Finding` values) from the
evidence it met, `roots` says which follow from another, `failures` renders a
failed check (and a rule's failure or warning) for a person from its values. The ways users
start a run are in `checkpointspec.conformance.frontends`.
"""
