"""Running a Hypothesis search: everything of a check's property or state-machine run
but the check's body and the machine. Checks call `properties.run_property` and
`stateful.run_machine`; a run reads and writes its check only through
`driver.SearchHost`, which the harness (in `run/`, above this package) is.

| module | what |
|---|---|
| `replay` | the settings of every Hypothesis run; exact replay by seed or reproduce blob |
| `budget` | the run's time cap as each check sees it (`Slice`, `Allowance`), and the weights of each kind of check that share out a failure's shrinking |
| `exploration` | rounds of a search, each tolerating what the earlier ones found |
| `driver` | what a run needs of its check (`SearchHost`); examples admitted within the check's slice (`within_slice`); a run in exploration rounds (`explore_runs`) |
| `properties` | property runs: a check's body on one fresh store per generated example (`run_property`) |
| `stateful` | state-machine runs: a machine the caller builds, run in rounds within the slice (`run_machine`) |
| `transcripts` | each run's calls and answers, and the call a re-run answered differently (`AnsweredDifferently`) |
"""
