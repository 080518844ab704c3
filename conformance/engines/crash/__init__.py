"""Crashes: power losses and kills, simulated or rebuilt from a real process's system calls.

| module | what |
|---|---|
| `states` | the crash states a power loss can leave, from a list of store operations |
| `disk` | the simulated disk (`FileSystem` port) that records those operations |
| `recorder` | any process's store writes recorded with strace, as the same operations |
| `stopper` | a live process tree held with ptrace right after its Nth store-changing system call |
| `verdicts` | what a store must show after a crash, and the verdict on one crash state (DUR-002, DUR-003, KILL-001) |
| `holds` | writers held right after one of their system calls (KILL-001, READ-003) |
| `contract_kills` | a writer of any `Contract` killed right after each of its store-changing system calls, the store read back and judged as a history |
| `contract_power_loss` | a power loss at any point of a traced writer of any `Contract`, each crash state read back and judged as a history |
| `contract_server_power_loss` | the same for a store kept by a server the kit controls: the server's data directory traced, each crash state started as a server and read back |
| `killed_layer_run` | a restore or compaction in a child process killed at a fault point or system call (RESTORE-006, KILL-001) |
"""
