"""``notebooks/explore_routes.ipynb`` runs top to bottom against an audited lake and draws its plots.

The kernel is this test's own interpreter (the venv's), named by a kernel spec written for the
test, so no other Jupyter installation on the machine can hand the notebook a different Python.
The notebook starts its own local[2] Spark session in the kernel process.
"""

from __future__ import annotations

import base64
import io
import json
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from PIL import Image

from jobs.spark.profile import SMALL_DAY_JAVA_OPTIONS
from tests.jobs.audited import audited_lake  # noqa: F401  (fixture)

pytestmark = [pytest.mark.slow, pytest.mark.spark]

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "explore_routes.ipynb"
KERNEL = "nsaudit-test-venv"
PLOTS = ("route-plot", "liveness-plot", "divergence-plot", "distribution-plot")


def _tagged(nb, tag: str):
    cells = [c for c in nb.cells if tag in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"{len(cells)} cells tagged {tag}"
    return cells[0]


def _coloured_share(png_base64: str) -> float:
    """The share of a PNG's pixels in a saturated colour: drawn data, not axes, text or background."""
    image = Image.open(io.BytesIO(base64.b64decode(png_base64))).convert("RGB")
    saturated = sum(
        count
        for count, (r, g, b) in image.getcolors(maxcolors=image.width * image.height)
        if max(r, g, b) - min(r, g, b) > 60
    )
    return saturated / (image.width * image.height)


def test_the_notebook_is_committed_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)


def test_the_notebook_runs_and_draws_its_plots(audited_lake, tmp_path, monkeypatch):  # noqa: F811  (the imported fixture)
    spec_dir = tmp_path / "jupyter" / "kernels" / KERNEL
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "nsaudit venv (test)",
                "language": "python",
            }
        )
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("NSAUDIT_LAKE", str(audited_lake.lake))
    # the kernel's Spark JVM compiles with the JIT's first tier only, as a small day's audit does
    # (the optimizing tier's compile time outweighs the few queries of a small lake; no result changes)
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", SMALL_DAY_JAVA_OPTIONS)
    for name in ("NSAUDIT_DATE", "NSAUDIT_TOPIC", "NSAUDIT_AT", "NSAUDIT_CLUSTER"):
        monkeypatch.delenv(name, raising=False)

    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb, kernel_name=KERNEL, timeout=600, startup_timeout=120, resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    )
    client.execute()  # raises CellExecutionError, with the cell and its traceback, on any error

    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    printed = "".join(o.get("text", "") for o in _tagged(nb, "setup").outputs if o.output_type == "stream")
    assert f"day {audited_lake.day}" in printed, printed  # the latest audited day, found by itself
    for tag in PLOTS:
        images = [o for o in _tagged(nb, tag).outputs if "image/png" in o.get("data", {})]
        assert len(images) == 1, f"{tag}: {len(images)} images"
        assert _coloured_share(images[0]["data"]["image/png"]) > 0.02, f"{tag}: nothing drawn"
    # the route of the chosen topic on every simulated server
    route_table = next(o for o in _tagged(nb, "route").outputs if o.output_type == "execute_result")
    for ns in audited_lake.servers:
        assert ns in route_table["data"]["text/plain"], ns
