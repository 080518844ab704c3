"""The backend under test, as the engines open it.

| module | what |
|---|---|
| `provenance` | opening handles (`open_checkpointer`, through `checkpointspec.backends.registry`) that note which exceptions the backend raised, as a `RaisedBy` value (`raised_by`) |
| `session_layer` | loading the session layer under test (``--session-layer``) and noting what it raises, as the layer's |
| `fault_codecs` | codecs that seal, fail or corrupt on purpose |
"""
