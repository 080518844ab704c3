"""Children that speak the stdio protocol badly, on purpose, for the proxy's tests.

``python stdio_children.py HELLO LINE...``: answers ``hello`` with ``HELLO`` (a
JSON result, or the word ``raw:`` and a whole line), then each later request
with the next ``LINE``, where ``{id}`` stands for the request's id; ``close``
is always answered properly. ``exit:N`` as a line exits with status N after
writing ``dying`` to stderr.
"""

from __future__ import annotations

import json
import sys


def main(hello: str, lines: list[str]) -> None:
    script = iter(lines)
    for raw in sys.stdin:
        request = json.loads(raw)
        rid = request["id"]
        if request["op"] == "hello":
            reply = hello[4:] if hello.startswith("raw:") else f'{{"id":{rid},"result":{hello}}}'
        elif request["op"] == "close":
            reply = f'{{"id":{rid},"result":null}}'
        else:
            line = next(script)
            if line.startswith("exit:"):
                sys.stderr.write("dying\n")
                sys.stderr.flush()
                raise SystemExit(int(line[5:]))
            reply = line.replace("{id}", str(rid))
        sys.stdout.write(reply + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
