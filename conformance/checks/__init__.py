"""The kit's example and property checks, one module per area of the catalog.

Importing this package registers every check in `checkpointspec.conformance.registry.CHECKS`.
"""

from . import (  # noqa: F401
    appending,
    arguments,
    codecs,
    commanded,
    concurrency,
    integrity,
    lifecycle,
    model_based,
    powerloss,
    reading,
    session_ids,
    stress,
    truncation,
)
