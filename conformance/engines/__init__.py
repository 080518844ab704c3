"""The machinery the checks drive, independent of any one rule.

| module or folder | engine |
|---|---|
| `run` | the run as one value (`KitRun`): backend, declared capabilities, profile, seed, suite, options; the replay command |
| `harness`, `profiles` | what a check gets (`Harness`: the run, handles, the session layer) and the profiles' budgets |
| `session_layer` | loading the session layer under test (``--session-layer``) and noting what it raises |
| `provenance` | opening handles (`open_checkpointer`, through `checkpointspec.backends.registry`) that note which exceptions the backend raised |
| `violations`, `outcomes` | rule violations; comparing a backend's outcome with the model's |
| `replay` | the settings of every Hypothesis run; exact replay by seed or reproduce blob |
| `fault_codecs` | codecs that seal, fail or corrupt on purpose |
| `machines/` | the state machines: model-based (storage), session, commanded workers; the ledger, strategies |
| `processes/` | worker processes: the client (the stdio protocol plus kit-only requests), the worker, process groups, stress |
| `history/` | the history checker: `checker` (the entry point), `records`, `chain`, `epochs`, `realtime`, `linearize` |
| `crash/` | power losses and kills: crash states, the simulated disk, the strace recorder, the system-call stopper, crash verdicts, holds, killed restores |
"""
