"""The house's sizes: no module of the packages over 450 lines, no function over 60.

A module past 450 lines or a function past 60 has usually grown a second job; the limits say where
to cut before it is hard to. Tests and benchmarks are not held to them.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("common", "schemas", "nameserver", "jobs", "nsaudit")
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60


def _sources() -> list[Path]:
    return [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]


def test_no_module_is_over_450_lines():
    long = {
        str(p.relative_to(ROOT)): n for p in _sources() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_is_over_60_lines():
    long = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = lines
    assert long == {}
