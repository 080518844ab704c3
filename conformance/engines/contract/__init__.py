"""The contract as the engines observe it.

| module | what |
|---|---|
| `contract` | `Contract`: a contract as a value the generic engines take (rules, sequential model, operations, the rule an answer breaks) |
| `checkpointer` | the checkpointer contract as a `Contract` value, for the generic engines |
| `violations` | `RuleViolation`: a rule broken, with its evidence; `RuleWarning`: a SHOULD rule not met |
| `answers` | an answer of the wrong type is a violation of the rule that defines it |
| `outcomes` | a backend's outcome (`Ok`/`Err`) beside the model's, and reading a whole log |
| `ledger` | every event appended: where it came from, and which rule its presence breaks |
"""
