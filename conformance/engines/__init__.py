"""The machinery the checks drive, independent of any one rule.

| module | engine |
|---|---|
| `loading` | resolving a backend name to its factory and opening handles |
| `session_layer` | loading the session layer under test (``--session-layer``) and noting what it raises |
| `violations`, `outcomes` | rule violations; comparing a backend's outcome with the model's |
| `strategies` | Hypothesis strategies for events, ids, seqs and bad input |
| `machine`, `machine_base` | the model-based state machine (backend vs `SpecModel`, step by step) |
| `ledger` | every event appended: where it came from, and which rule its presence breaks |
| `commanded`, `workers` | the worker protocol (JSON lines over pipes) and the worker process it drives |
| `commanded_machine` | the state machine that pauses and kills workers inside writes (KILL-001) |
| `stress` | free-running workers that record a history |
| `history/` | the history checker: `checker` (the entry point), `records`, `chain`, `epochs`, `realtime`, `linearize` |
| `disk`, `crashstates` | the simulated disk and the crash states of a power loss |
| `tracing` | any process's store writes recorded with strace, as crash-state operations |
| `syscall_stop` | a live process tree held with ptrace right after its Nth store-changing system call |
| `fault_codecs` | codecs that seal, fail or corrupt on purpose |
| `restore_kill` | a restore in a child process that SIGKILLs itself at its k-th fault point (RESTORE-006) |
"""
