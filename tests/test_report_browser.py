"""The HTML report in a real browser: headless Chromium opens a report of two policies on a
slice of KTH-SP2, every figure must load (decoded at the size of its PNG) and the screenshot
must show them. Skipped when no Chromium is installed (``apt-get install chromium``)."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from batsched_ml.cli import main
from batsched_ml.report import figures
from batsched_ml.results.outputs import write_replay
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from tests.conftest import workload_head

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
WIDTH = 1400


def browser() -> str:
    found = os.environ.get("CHROMIUM") or next(filter(None, map(shutil.which, BROWSERS)), None)
    if not found:
        pytest.skip(
            "no Chromium to render the report (none of "
            f"{', '.join(BROWSERS)} on PATH, CHROMIUM unset): apt-get install chromium"
        )
    return found


def run_browser(binary: str, profile: Path, *arguments: str) -> subprocess.CompletedProcess:
    """Headless Chromium, nothing fetched from the network, its own profile folder."""
    command = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *arguments,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=True)


#: Appended to a copy of the page: once loaded, it writes what the browser made of every
#: image into the DOM, which --dump-dom prints.
PROBE = """<script>
window.addEventListener("load", () => {
  const images = [...document.images].map((img) => ({
    alt: img.alt, complete: img.complete, width: img.naturalWidth, height: img.naturalHeight,
    shown: img.getBoundingClientRect().width,
  }));
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify({
    images, page_height: document.documentElement.scrollHeight,
    page_width: document.documentElement.scrollWidth,
  });
  document.body.appendChild(pre);
});
</script>"""


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def chromium() -> str:
    return browser()


@pytest.fixture(scope="module")
def report(chromium: str, kth_workload, tmp_path_factory) -> Path:
    """A report of FCFS and SPF (base, classification-idempotent and class-clairvoyant, so
    that every figure is drawn, the trade-off too) on 1,500 KTH-SP2 jobs (``chromium`` first:
    no browser, no need for the report)."""
    root = tmp_path_factory.mktemp("browser")
    workload = workload_head(kth_workload, 1500)
    for policy in ("fcfs", "spf"):
        for variant in ("base", "classification-idempotent", "class-clairvoyant"):
            result = run_replay(workload, ReplayConfig(policy=policy, variant=variant))
            write_replay(result, root / "runs" / f"{policy}-{variant}")
    assert main(["report", str(root / "runs"), "-o", str(root / "report")]) == 0
    return root / "report"


def test_every_figure_loads_in_chromium_and_shows(
    chromium: str, report: Path, tmp_path: Path
) -> None:
    binary = chromium
    page = (report / "index.html").read_text()
    pngs = {p.name: png_size(p.read_bytes()) for p in sorted(report.glob("*.png"))}
    # every figure but the guard's weeks, which only a classification-guarded run has
    drawn = [figure for figure in figures.FIGURES if figure[0] != "guard"]
    names = [name for name, _draw, _caption in drawn]
    assert len(pngs) == len(names)

    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("</body>", PROBE + "</body>"))
    dom = run_browser(
        binary,
        tmp_path / "profile-dom",
        f"--window-size={WIDTH},1000",
        "--virtual-time-budget=10000",
        "--dump-dom",
        probed.as_uri(),
    ).stdout
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, "the page's load event never came (no probe in the DOM)"
    probe = json.loads(html.unescape(found.group(1)))
    images = probe["images"]
    assert len(images) == len(pngs) == len(drawn)
    # every image decoded, at its PNG's size (a broken image has no natural size), in order
    trace = "KTH-SP2-1996-2.1-cln"
    assert [(i["width"], i["height"]) for i in images] == [pngs[f"{trace}-{n}.png"] for n in names]
    assert all(i["complete"] and 0 < i["shown"] <= WIDTH for i in images)
    assert probe["page_width"] <= WIDTH  # no figure makes the page scroll sideways
    assert [i["alt"] for i in images] == [caption for _n, _d, caption in drawn]

    height = probe["page_height"]
    shot = tmp_path / "report.png"
    run_browser(
        binary,
        tmp_path / "profile-shot",
        f"--window-size={WIDTH},{height}",
        f"--screenshot={shot}",
        (report / "index.html").as_uri(),
    )
    assert png_size(shot.read_bytes()) == (WIDTH, height)
    import matplotlib.image

    pixels = (matplotlib.image.imread(shot)[..., :3] * 255).round().astype(int)
    not_white = (pixels < 250).any(axis=-1)
    assert not_white.mean() > 0.05, "the screenshot is (nearly) blank"
    # the base variant's colour, as the figures draw it: the figures are on screen
    base = np.array([int(figures.COLOURS["base"][i : i + 2], 16) for i in (1, 3, 5)])
    assert (np.abs(pixels - base).sum(axis=-1) <= 6).sum() > 5_000
    # ...all the way down: the last figure (the waits) shows near the bottom of the page
    bottom = pixels[-height // 5 :]
    assert (np.abs(bottom - base).sum(axis=-1) <= 6).sum() > 200
    keep = os.environ.get("BATSCHED_SCREENSHOTS")
    if (
        keep
    ):  # to look at it: BATSCHED_SCREENSHOTS=DIR python -m pytest tests/test_report_browser.py
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / "report.png")
