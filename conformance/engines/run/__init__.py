"""The run and what a check gets from it.

| module | what |
|---|---|
| `kit_run` | the run as one value (`KitRun`): backend, declared capabilities, profile, seed, suite, options; the replay command |
| `profiles` | the profiles: counts and budgets |
| `harness` | what a check gets (`Harness`: the run, handles, the session layer) |
"""
