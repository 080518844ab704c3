"""The run and what a check gets from it.

| module | what |
|---|---|
| `kit_run` | the run as one value (`KitRun`): backend, declared capabilities, profile, seed, suite, options; the backend under test with its options (`KitRun.target`); the replay command |
| `profiles` | the profiles: counts and budgets |
| `harness` | what a check gets (`Harness`: the run, the backend under test as `Harness.target`, handles, the session layer) |
"""
