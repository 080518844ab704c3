"""The kit's worker processes: each holds a handle of its own on the store under test.

| module | what |
|---|---|
| `client` | the worker protocol (JSON lines over pipes) and `WorkerClient`, the one way the kit drives a worker |
| `worker` | the worker process (``python -m checkpointspec.conformance.engines.processes.worker``) |
| `groups` | each worker is a process group, killed whole |
| `stress` | free-running workers that record a history for the history checker |
"""
