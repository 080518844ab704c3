"""The backend under test, as the engines open it.

The backend itself, with its options, is a `checkpointspec.backends.registry.BackendTarget`
(the stdio server needs it too, so it lives below the kit); these modules add the kit's view.

| module | what |
|---|---|
| `provenance` | opening handles (`open_checkpointer`, through `checkpointspec.backends.registry`) that note which exceptions the backend raised, as a `RaisedBy` value (`raised_by`) |
| `session_layer` | loading the session layer under test (``--session-layer``) and noting what it raises, as the layer's |
| `fault_codecs` | codecs that seal, fail or corrupt on purpose |
| `fault_serde` | a LangGraph saver's serializer failing on command |
"""
