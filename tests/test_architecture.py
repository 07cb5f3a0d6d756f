"""The house's shape: every module imports, no import cycle, and layers point one way.

Imports are read from the source (every ``import``, also inside functions and under
``TYPE_CHECKING``), so a cycle or an arrow back up fails here even where Python would tolerate it at
run time. A module's layer is that of the longest prefix named in ``LAYERS``; it may import its own
layer and the ones below, never one above.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("common", "schemas", "nameserver", "jobs", "nsaudit")

# lowest first; the command line above both halves, config/errors/time and schemas below both
LAYERS: dict[str, int] = {
    "common": 0,
    "schemas": 1,
    # the server half (the package itself: its version, read by the server and the simulator)
    "nameserver": 10,
    "nameserver.model": 10,
    "nameserver.events": 10,  # one builder per event type: the route tables, server, simulator and collector use them
    "nameserver.codec": 11,
    "nameserver.routes": 12,
    "nameserver.eventlog": 12,
    "nameserver.acl": 12,
    "nameserver.metrics": 12,
    "nameserver.server": 13,
    "nameserver.client": 13,
    "nameserver.layout": 13,
    "nameserver.fleet": 14,
    "nameserver.collect": 14,
    "nameserver.sim": 14,
    "nameserver.cli": 15,
    "nameserver.__main__": 16,
    # the batch half
    "jobs": 20,
    "jobs.spark": 20,
    "jobs.storage": 20,  # where events and the lake live (local or an object store), below the lake
    "jobs.lake": 21,
    "jobs.housekeeping": 22,
    "jobs.ingest": 22,
    "jobs.rebuild": 23,
    "jobs.snapshots": 24,
    "jobs.analytics": 25,
    "jobs.analytics.incidents": 25,  # reads the findings every stage wrote, imports none of them
    "jobs.report": 26,
    "jobs.query": 26,
    "jobs.preflight": 26,  # lists the day's segments (ingest) before an audit's first write
    "jobs.nightly_audit": 27,
    "jobs.audit_day": 27,
    "jobs.backfill": 27,
    # the command line
    "nsaudit": 30,
}


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The project modules ``name`` imports (a ``from pkg import mod`` counts as ``pkg.mod``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                targets.add(full if full in MODULES else base)
    return {t for t in targets if t in MODULES and t != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _layer(name: str) -> int:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        if prefix in LAYERS:
            return LAYERS[prefix]
    raise AssertionError(f"{name} has no layer: add its package to LAYERS in {Path(__file__).name}")


@pytest.mark.parametrize("name", sorted(n for n in MODULES if not n.endswith("__main__")))
def test_every_module_imports(name):
    importlib.import_module(name)


def test_no_arrow_runs_back_up():
    upward = [
        f"{a} ({_layer(a)}) imports {b} ({_layer(b)})"
        for a, targets in sorted(GRAPH.items())
        for b in sorted(targets)
        if _layer(b) > _layer(a)
    ]
    assert upward == []


def test_the_server_half_never_imports_the_batch_half():
    wrong = [
        f"{a} imports {b}"
        for a, targets in sorted(GRAPH.items())
        if a.split(".")[0] in ("nameserver", "common", "schemas")
        for b in sorted(targets)
        if b.split(".")[0] in ("jobs", "nsaudit")
    ]
    assert wrong == []


def test_the_lake_is_entered_through_its_front_door():
    """Outside ``jobs.lake``, the Delta internals (``jobs.lake.delta``) are reached through
    ``jobs.lake.tables`` only."""

    def within(name: str, package: str) -> bool:
        return name == package or name.startswith(package + ".")

    wrong = [
        f"{a} imports {b}"
        for a, targets in sorted(GRAPH.items())
        if not within(a, "jobs.lake")
        for b in sorted(targets)
        if within(b, "jobs.lake.delta")
    ]
    assert wrong == [], "take these names from jobs.lake.tables"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle():
    assert _cycles(GRAPH) == []


def test_cycle_finder_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _readme_map() -> set[str]:
    """The paths named in the first column of the README's package map."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Where things are", 1)[1].split("\n## ", 1)[0]
    names = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            names.update(part.strip("`/ ") for part in first_cell.split(",") if part.strip().startswith("`"))
    return names


def test_the_readme_map_matches_the_tree():
    named = _readme_map()
    assert sorted(n for n in named if not (ROOT / n).exists()) == []
    packages = [p for p in PACKAGES if p not in ("jobs", "nameserver")]
    packages += [
        f"{half}/{p.name}"
        for half in ("jobs", "nameserver")
        for p in sorted((ROOT / half).iterdir())
        if p.name not in ("__init__.py", "__main__.py", "__pycache__") and (p.is_dir() or p.suffix == ".py")
    ]
    assert sorted(p for p in packages if p not in named and p.removesuffix(".py") not in named) == []


def test_the_tests_mirror_the_packages():
    """Every folder of tests is that of a package (``tests/jobs/ingest/`` tests ``jobs/ingest/``),
    but ``tests/interop/``, the tests against real RocketMQ (README, "Where the tests are")."""
    folders = [p.parent.relative_to(ROOT / "tests") for p in (ROOT / "tests").rglob("__init__.py")]
    assert (
        sorted(
            str(f) for f in folders if f.parts and f.parts[0] != "interop" and not (ROOT / f / "__init__.py").exists()
        )
        == []
    )
