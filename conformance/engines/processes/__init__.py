"""The kit's worker processes: each holds a handle of its own on the store under test.

| module | what |
|---|---|
| `client` | `WorkerClient`, the one way the kit drives a worker: the stdio protocol's client wire (`checkpointspec.backends.stdio.wire`) and its reading of a child (`checkpointspec.backends.stdio.child`), with the kit's own requests |
| `messages` | the kit's own requests (`PauseAt`, `AppendBatches`, `Stress`) and their interim replies: the kit's extension of the stdio protocol |
| `worker` | the worker process (``BackendTarget.argv(WORKER_PROGRAM)``): the stdio server plus the kit's own requests |
| `forkserver` | workers forked from a process that has imported the backend already |
| `groups` | each worker is a process group, killed whole |
| `stress` | free-running workers that record a history for the history checker |
| `contract_programs` | concurrent programs of any `Contract`'s calls on handles of this process, judged by `history.linearizable` |
| `filters` | a worker installs on itself the seccomp filter its tracer asked for (`crash.stopper.store_call_filter`) |
| `contract_worker` | the same programs, one worker process each (``python -m checkpointspec.conformance.engines.processes.contract_worker``) |
"""
