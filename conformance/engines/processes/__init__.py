"""The kit's worker processes: each holds a handle of its own on the store under test.

| module | what |
|---|---|
| `client` | `WorkerClient`, the one way the kit drives a worker: the stdio protocol, with the kit-only requests |
| `worker` | the worker process (``BackendTarget.argv(WORKER_PROGRAM)``): the stdio server plus the kit-only requests |
| `forkserver` | workers forked from a process that has imported the backend already |
| `groups` | each worker is a process group, killed whole |
| `stress` | free-running workers that record a history for the history checker |
"""
