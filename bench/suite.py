"""Generate a synthetic suite: modules of plain functions, classes and parametrized tests."""

from __future__ import annotations

import argparse
from pathlib import Path

MODULE_TEMPLATE = """
import pytest

PARAMS = list(range({params}))


class TestGroup{index}:
{methods}

@pytest.mark.parametrize("value", PARAMS)
def test_param_{index}(value):
    assert value >= 0

{functions}
"""


def generate(root: Path, tests: int, per_module: int = 100, marked: bool = True) -> int:
    """Write ``tests`` tests (rounded to whole modules) under ``root``; return the count."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pytest.ini").write_text("[pytest]\n")
    modules = max(1, tests // per_module)
    methods_n, params_n = per_module // 4, per_module // 2
    functions_n = per_module - methods_n - params_n
    for index in range(modules):
        methods = "\n".join(
            f"    def test_method_{m}(self):\n        assert True\n" for m in range(methods_n)
        )
        functions = "\n".join(
            ("@pytest.mark.tpu\n" if marked and f % 10 == 0 else "")
            + f"def test_function_{index}_{f}():\n    assert True\n"
            for f in range(functions_n)
        )
        (root / f"test_mod_{index:04d}.py").write_text(
            MODULE_TEMPLATE.format(
                index=index, params=params_n, methods=methods, functions=functions
            )
        )
    return modules * per_module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("root", type=Path)
    parser.add_argument("--tests", type=int, default=10_000)
    args = parser.parse_args()
    print(generate(args.root, args.tests))


if __name__ == "__main__":
    main()
