"""The documentation site builds with ``mkdocs build --strict`` (a broken link, a missing anchor
or an API reference that does not resolve fails the build) and its pages show what they
should in headless Chromium (Debian's ``chromium``; skipped only where it is missing, and
``.ci/run`` installs it): the home page and the source's options page, read back from the DOM
Chromium built (``--dump-dom``, after the theme's scripts ran) and from a screenshot.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from html import unescape
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"),
                             shutil.which("google-chrome")) if p), None)
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-extensions", "--disable-sync", "--no-first-run", "--mute-audio",
         "--hide-scrollbars", "--window-size=1280,1600"]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]' (make venv does)")
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert r.returncode == 0, f"mkdocs build --strict failed:\n{r.stdout}\n{r.stderr}"
    return out


def test_site_builds_strictly_with_every_page(site):
    nav_pages = re.findall(r":\s+([\w/.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    assert len(nav_pages) >= 25
    for page in nav_pages:
        html = site / (page[:-3].removesuffix("index") + "/index.html").lstrip("/")
        assert html.is_file(), f"{page} was not built ({html})"
    api = (site / "reference" / "index.html").read_text()
    # mkdocstrings rendered the docstrings (not only the headings)
    assert "EmbeddedBroker" in api and "Register the" in api and "import guard" in api


def test_a_broken_link_fails_the_strict_build(tmp_path):
    pytest.importorskip("mkdocs")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the source](no-such-page.md).\n")
    (tmp_path / "mkdocs.yml").write_text("site_name: t\nstrict: true\n")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert r.returncode != 0 and "no-such-page.md" in r.stderr + r.stdout


def _text(html: str) -> str:
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)))


def _chromium(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed: "
                    "`apt-get install -y chromium` (Debian's package; .ci/run installs it)")
def test_chromium_shows_the_home_page_and_the_options_page(site, tmp_path):
    home = (site / "index.html").as_uri()
    dom = _chromium(["--dump-dom", home], tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    h1 = re.findall(r"<h1[^>]*>(.*?)</h1>", dom.stdout, re.S)
    assert [_text(h).replace("¶", "").strip() for h in h1][:1] == ["spark-amqp"], h1
    text = _text(dom.stdout)
    assert "at-least-once delivery" in text and "What is in the box" in text
    # the theme's navigation (built by the page's own HTML and scripts) lists the pages
    for label in ("Getting started", "The source", "The embedded broker", "Troubleshooting",
                  "API reference"):
        assert label in text, label

    options = (site / "source" / "index.html").as_uri()
    dom = _chromium(["--dump-dom", options], tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    heads = [_text(h).replace("¶", "").strip()
             for h in re.findall(r"<h[12][^>]*>(.*?)</h[12]>", dom.stdout, re.S)]
    assert "The source: queue mode and stream mode" in heads
    assert "Queue mode options" in heads and "Stream mode options" in heads
    tables = re.findall(r"<table.*?</table>", dom.stdout, re.S)
    assert len(tables) >= 2
    queue_table = _text(tables[0])
    for option in ("maxMessagesPerTrigger", "maxBytesPerTrigger", "prefetch", "failOnDataLoss"):
        assert option in queue_table, option
    assert any("startingOffsets" in _text(t) for t in tables[1:])

    # the home page as drawn: a screenshot that is not blank (text and the theme's header)
    png = tmp_path / "home.png"
    shot = _chromium([f"--screenshot={png}", home], tmp_path)
    assert shot.returncode == 0 and png.is_file(), shot.stderr[-2000:]
    from PIL import Image

    with Image.open(png) as img:
        assert img.size == (1280, 1600)
        colours = img.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50, "the screenshot is (almost) one colour"
