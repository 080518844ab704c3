"""Running a Hypothesis search.

| module | what |
|---|---|
| `replay` | the settings of every Hypothesis run; exact replay by seed or reproduce blob |
| `budget` | the weights of each kind of check and the slice of the time budget a check runs in |
| `exploration` | rounds of a search, each tolerating what the earlier ones found |
"""
