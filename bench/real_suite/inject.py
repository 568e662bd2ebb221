"""LINE injected at the top of FUNCTION's body in FILE (after its docstring), as a
slowdown committed into a real suite is (``slowdown.sh``, ``named_slowdown.sh``): the
first ``def FUNCTION`` in the file, a method's too.

    python inject.py quax/examples/zero/_core.py _shape_dtype "import time; time.sleep(0.01)"
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    path, function, injected = argv
    text = Path(path).read_text()
    match = re.search(rf"^[ \t]*def {re.escape(function)}\(.*?\).*?:\n", text, re.M | re.S)
    if match is None:
        print(f"inject.py: no def {function} in {path}", file=sys.stderr)
        return 2
    body = text[match.end() :]
    docstring = re.match(r'(\s+)("""|\'\'\').*?\2\n', body, re.S)
    leading = re.match(r"\s+", body)
    indent = leading.group(0).split("\n")[-1] if leading else "    "
    at = match.end() + (docstring.end() if docstring else 0)
    Path(path).write_text(text[:at] + f"{indent}{injected}\n" + text[at:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
