"""The Hypothesis state machines that drive a backend beside the spec's model.

| module | machine |
|---|---|
| `storage`, `storage_runtime` | the model-based machine (backend vs `SpecModel`, step by step): its operations, and the loop, handles and comparisons they run on |
| `session`, `session_runtime` | the session machine (one session and a real workspace through the session layer): its steps, and what they run on |
| `commanded` | worker processes paused and killed inside writes (KILL-001, READ-003) |
| `contract` | the model-based machine of any `Contract`: one rule per operation |
| `strategies` | Hypothesis strategies for events, ids, seqs and bad input |
"""
