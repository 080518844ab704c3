"""``python -m checkpointspec.backends.stdio`` prints the protocol's JSON Schema
(what ``protocol.schema.json`` holds)."""

import json
import sys

from .messages import protocol_schema

json.dump(protocol_schema(), sys.stdout, indent=2, sort_keys=True)
sys.stdout.write("\n")
