"""The machinery the checks drive, independent of any one rule.

The folders, lowest first; a folder imports only the folders above it in this
table (`tests/test_layering.py` holds the order):

| folder | engine |
|---|---|
| `contract/` | the contract as the engines observe it: a contract as a value (`Contract`), rule violations and SHOULD-rule warnings, answers checked for their type, a backend's outcome beside the model's, the ledger of every event appended |
| `target/` | the backend under test: opening handles that note what the backend raised (`provenance`), the session layer under test, codecs that seal, fail or corrupt on purpose |
| `search/` | running a Hypothesis search: settings and exact replay (`replay`), the time budget's slices (`budget`), exploration rounds (`exploration`), the drivers the checks call (`driver`, `properties`, `stateful`) |
| `run/` | the run as one value (`KitRun`), the profiles, and what a check gets (`Harness`) |
| `history/` | the history checkers: is a recorded concurrent history explained by the contract? (the checkpointer's, and any contract's linearizability) |
| `processes/` | worker processes: the client, the worker, the fork server, process groups, stress; concurrent programs of any contract's calls |
| `machines/` | the state machines: model-based (storage), session, commanded workers; strategies; the model-based machine of any contract |
| `crash/` | power losses and kills: crash states, the simulated disk, the strace recorder, the system-call stopper, crash verdicts, holds, killed restores |
| `network/` | the fault proxy between a client and its server, and the workload recorded through it |
"""
