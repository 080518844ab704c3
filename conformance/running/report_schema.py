"""The JSON Schema of the JSON report (``--report FILE.json``), and the copy the package ships.

The schema is generated from `KitReport` and the Structs it holds
(``msgspec.json.schema``), so it cannot drift from what the kit writes; the
package ships it as ``report.schema.json`` beside this module, for tools that
read reports without importing the kit. A test fails when the shipped file
differs from the generated one. After changing a Struct of the report,
regenerate it from the repository root::

    python -m checkpointspec.conformance.running.report_schema > conformance/running/report.schema.json
"""

from __future__ import annotations

import json
import sys
from importlib import resources

import msgspec

from .report import REPORT_SCHEMA_VERSION, KitReport

__all__ = ["REPORT_SCHEMA_FILE", "report_schema", "schema_text", "shipped_report_schema"]

REPORT_SCHEMA_FILE = "report.schema.json"
"""The file name of the shipped schema, in the package ``checkpointspec.conformance.running``."""


def report_schema() -> dict[str, object]:
    """The JSON Schema (draft 2020-12) of the JSON report, generated from `KitReport`."""
    schema: dict[str, object] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"checkpointspec report, schema_version {REPORT_SCHEMA_VERSION}",
    }
    schema.update(msgspec.json.schema(KitReport))
    # Through JSON and back: msgspec gives a tuple field's default as a tuple, JSON as a list.
    plain: dict[str, object] = json.loads(json.dumps(schema))
    return plain


def schema_text() -> str:
    """`report_schema` as the shipped file's text: sorted keys, two-space indent, final newline."""
    return json.dumps(report_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def shipped_report_schema() -> dict[str, object]:
    """The schema shipped in the installed package, parsed."""
    package = __name__.rpartition(".")[0]
    text = resources.files(package).joinpath(REPORT_SCHEMA_FILE).read_text(encoding="utf-8")
    schema: dict[str, object] = json.loads(text)
    return schema


def main() -> int:
    """Print the generated schema to stdout."""
    sys.stdout.write(schema_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
