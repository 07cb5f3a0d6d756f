"""The daily report as a reader sees it: ``index.html`` rendered by headless Chromium.

Playwright drives the system's Chromium (``/usr/bin/chromium``, installed by ``.ci/setup.sh``), not
a browser of its own. The page is the real report of a small simulated and audited day
(``tests.jobs.audited``).
"""

from __future__ import annotations

import io
import re
import shutil

import pytest
from PIL import Image
from playwright.sync_api import sync_playwright

from jobs.report.render import DIVERGENCE_COLORS, END_REASON_COLORS
from tests.jobs.audited import audited_lake  # noqa: F401  (fixture)

pytestmark = [pytest.mark.slow, pytest.mark.spark]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
VIEWPORT = {"width": 1400, "height": 900}
# what loads a resource: an attribute naming a URL, or CSS
_BY_URL = re.compile(
    r"""(?:\b(?:src|href|xlink:href|action|srcset)\s*=\s*["']?\s*(?:https?:)?//)|url\(\s*["']?\s*(?:https?:)?//|@import""",
    re.IGNORECASE,
)


class RenderedReport:
    """The loaded page, the URLs it requested and the size of its document."""

    def __init__(self, page, requests: list[str]) -> None:
        self.page = page
        self.requests = requests
        self.scroll_width, self.scroll_height = page.evaluate(
            "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
        )

    def image(self, locator) -> Image.Image:
        """A screenshot of one element, as RGB."""
        return Image.open(io.BytesIO(locator.screenshot())).convert("RGB")


@pytest.fixture(scope="module")
def report(audited_lake):  # noqa: F811  (the imported fixture)
    """The report page loaded in headless Chromium (closed after the module)."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            requests: list[str] = []
            page.on("request", lambda request: requests.append(request.url))
            page.goto(audited_lake.report_html.as_uri(), wait_until="load")
            yield RenderedReport(page, requests)
        finally:
            browser.close()


def _colours(image: Image.Image) -> dict[tuple[int, int, int], int]:
    """Pixel count per colour (every colour: ``getcolors`` gives up past ``maxcolors``)."""
    return {colour: count for count, colour in image.getcolors(maxcolors=image.width * image.height)}


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))


def _assert_shown(report: RenderedReport, locator, what: str) -> Image.Image:
    """``locator`` is one visible element of real size, inside the page, not one flat colour."""
    assert locator.count() == 1, f"{what}: {locator.count()} elements"
    assert locator.is_visible(), what
    box = locator.bounding_box()
    assert box is not None and box["width"] > 100 and box["height"] > 50, (what, box)
    # on the page: nothing cut off at the left or top, nor past the viewport's width (no sideways
    # scrolling to see a plot) or the document's end
    assert box["x"] >= 0 and box["y"] >= 0, (what, box)
    assert box["x"] + box["width"] <= VIEWPORT["width"], (what, box)
    assert box["y"] + box["height"] <= report.scroll_height, (what, box, report.scroll_height)
    image = report.image(locator)
    colours = _colours(image)
    assert len(colours) > 8, f"{what} is (nearly) one colour: {colours}"
    background = max(colours.values())
    assert background < 0.98 * image.width * image.height, f"{what} is almost blank"
    return image


def test_the_page_is_not_blank_and_fits_the_window(report):
    shot = Image.open(io.BytesIO(report.page.screenshot(full_page=True))).convert("RGB")
    colours = _colours(shot)
    white = colours.get((255, 255, 255), 0)
    assert len(colours) > 50, "the page is blank or nearly"
    assert white < 0.95 * shot.width * shot.height, "the page is almost all white"
    assert report.page.locator("h1").inner_text().startswith("nsaudit report for 2026-11-21")
    # the long findings details wrap instead of widening the page
    assert report.scroll_width <= VIEWPORT["width"], report.scroll_width


def test_a_liveness_timeline_per_server(report, audited_lake):  # noqa: F811  (the imported fixture)
    plots = report.page.locator("figure.plot[data-plot=liveness]")
    subjects = sorted(plots.evaluate_all("figs => figs.map(f => f.dataset.subject)"))
    assert subjects == list(audited_lake.servers)
    for ns in audited_lake.servers:
        image = _assert_shown(
            report,
            report.page.locator(f"figure.plot[data-plot=liveness][data-subject='{ns}'] svg"),
            f"liveness on {ns}",
        )
        # the windows are drawn: bars in the colour of still-open windows (brokers alive at the end)
        assert _colours(image).get(_rgb(END_REASON_COLORS["open"]), 0) > 100, ns
        # its words are text, not glyph outlines: the browser's search finds servers and addresses
        words = report.page.locator(
            f"figure.plot[data-plot=liveness][data-subject='{ns}'] svg text"
        ).all_text_contents()
        assert any(w.startswith(f"Liveness on {ns}") for w in words), words[:5]
        assert any(re.fullmatch(r"[\d.]+:\d+", w) for w in words), words[:20]  # a broker address as a row label


def test_the_divergence_timeline(report):
    image = _assert_shown(report, report.page.locator("figure.plot[data-plot=divergence] svg"), "divergence episodes")
    colours = _colours(image)
    drawn = {kind: colours.get(_rgb(colour), 0) for kind, colour in DIVERGENCE_COLORS.items()}
    assert sum(drawn.values()) > 100, drawn


def test_a_queue_heatmap_per_cluster(report, audited_lake):  # noqa: F811  (the imported fixture)
    plots = report.page.locator("figure.plot[data-plot=distribution]")
    subjects = sorted(plots.evaluate_all("figs => figs.map(f => f.dataset.subject)"))
    assert subjects == list(audited_lake.clusters)
    for cluster in audited_lake.clusters:
        image = _assert_shown(
            report,
            report.page.locator(f"figure.plot[data-plot=distribution][data-subject='{cluster}'] svg"),
            f"heatmap of {cluster}",
        )
        assert len(_colours(image)) > 30, cluster  # cells and a colour bar, not only axes


def test_the_findings_table(report):
    table = report.page.locator("table#findings")
    _assert_shown(report, table, "findings table")
    rows = table.locator("tbody tr")
    assert rows.count() > 0
    severities = set(rows.locator("td:first-child").all_inner_texts())
    assert severities <= {"critical", "warning", "info"} and severities, severities


def test_the_report_loads_nothing_by_url(report, audited_lake):  # noqa: F811  (the imported fixture)
    text = audited_lake.report_html.read_text(encoding="utf-8")
    assert not _BY_URL.findall(text)
    # what the browser actually fetched: the page itself and nothing else
    assert report.requests == [audited_lake.report_html.as_uri()], report.requests
