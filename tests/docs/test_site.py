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
        html = site / (page[:-3] + ".html")  # use_directory_urls: false (the offline plugin)
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

    options = (site / "source.html").as_uri()
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


def _nav_links(dom: str) -> dict[str, str]:
    """``{label: href}`` of the navigation's links in a page's DOM (the theme's ``md-nav__link``
    anchors; the label is the link's text)."""
    links = {}
    for attrs, inner in re.findall(r'<a ([^>]*class="[^"]*md-nav__link[^"]*"[^>]*)>(.*?)</a>',
                                   dom, re.S):
        href = re.search(r'href="([^"]*)"', attrs)
        label = _text(inner).strip()
        if href and label and label not in links:
            links[label] = unescape(href.group(1))
    return links


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed")
def test_the_site_opened_from_disk_follows_its_links_to_pages(site, tmp_path):
    """The README's "mkdocs build, then site/index.html": from ``file://`` a link must land on
    a page, not on a directory listing (``use_directory_urls: true`` linked ``getting-started/``,
    which Chromium shows as "Index of .../getting-started/")."""
    from urllib.parse import urljoin

    home = (site / "index.html").as_uri()
    dom = _chromium(["--dump-dom", home], tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    links = _nav_links(dom.stdout)
    followed = 0
    for label, want_h1 in (("Getting started", "Getting started"), ("The sink", None),
                           ("Management API and page", None)):
        assert label in links, (label, sorted(links))
        target = urljoin(home, links[label])
        assert target.startswith("file://") and not target.endswith("/"), (label, target)
        page = _chromium(["--dump-dom", target], tmp_path)
        assert page.returncode == 0, page.stderr[-2000:]
        text = _text(page.stdout)
        assert "Index of" not in text[:300], f"{label}: {target} opened a directory listing"
        h1 = [_text(h).replace("¶", "").strip()
              for h in re.findall(r"<h1[^>]*>(.*?)</h1>", page.stdout, re.S)]
        assert h1, f"{label}: {target} has no heading: {text[:300]}"
        if want_h1:
            assert h1[0].startswith(want_h1), h1
        assert "md-nav__link" in page.stdout  # the theme's page, with its navigation
        followed += 1
    assert followed == 3


# Injected at the end of a built page (a copy beside it, so that its relative links resolve):
# measures how the browser laid out the page and writes the result into the DOM as JSON.
_LAYOUT_PROBE = """<script>
(function () {
  var broken = [], names = 0;
  document.querySelectorAll(".md-typeset table td code").forEach(function (c) {
    if (!/^[A-Za-z_][\\w.]*$/.test(c.textContent)) return;   // an option or field name
    names += 1;
    if (c.getClientRects().length !== 1) broken.push(c.textContent);
  });
  var cut = [];
  document.querySelectorAll(".md-typeset pre > code").forEach(function (c) {
    var pre = c.parentElement;
    if (c.scrollWidth > pre.clientWidth + 1 && getComputedStyle(c).whiteSpace === "pre")
      cut.push(c.textContent.slice(0, 60));
  });
  var out = document.createElement("pre");
  out.id = "layout-probe";
  out.textContent = JSON.stringify({names: names, broken: broken, cut: cut,
                                    width: window.innerWidth});
  document.body.appendChild(out);
})();
</script>"""


def _probe_layout(site: Path, page: str, tmp_path: Path, width: int) -> dict:
    import json

    src = site / page
    probe = src.with_name(src.stem + ".probe.html")
    probe.write_text(src.read_text().replace("</body>", _LAYOUT_PROBE + "</body>"))
    try:
        dom = subprocess.run([CHROMIUM, *[f for f in FLAGS if not f.startswith("--window-size")],
                              f"--window-size={width},1200",
                              f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                              probe.as_uri()], capture_output=True, text=True, timeout=120)
    finally:
        probe.unlink()
    assert dom.returncode == 0, dom.stderr[-2000:]
    m = re.search(r'<pre id="layout-probe">(.*?)</pre>', dom.stdout, re.S)
    assert m, "the layout probe did not run"
    return json.loads(unescape(m.group(1)))


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed")
@pytest.mark.parametrize("page", ["source.html", "sink.html", "streams.html"])
def test_option_names_in_tables_stay_on_one_line_and_code_lines_wrap(site, tmp_path, page):
    """docs/stylesheets/extra.css: an option name in a table cell is laid out on one line
    (one client rectangle: the theme broke ``maxMessagesPerPartition`` in three), and no code
    block's line runs past its box (they wrap). At a laptop's width and at a tablet's."""
    for width in (1280, 900):
        r = _probe_layout(site, page, tmp_path, width)
        assert r["names"] >= 5, r
        assert r["broken"] == [], f"{page} at {width}px: names broken over lines: {r['broken']}"
        assert r["cut"] == [], f"{page} at {width}px: code lines cut at the box: {r['cut']}"


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed")
def test_the_sink_page_has_an_introduction_and_a_table_of_contents(site, tmp_path):
    """The sink's page began with its option table under a lone heading: no introduction, and
    the theme's table of contents (the secondary navigation) was empty."""
    dom = _chromium(["--dump-dom", (site / "sink.html").as_uri()], tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    toc = re.search(r'<nav class="md-nav md-nav--secondary".*?</nav>', dom.stdout, re.S)
    assert toc, "no table of contents"
    entries = [_text(a).strip() for a in re.findall(r"<a [^>]*>(.*?)</a>", toc.group(0), re.S)]
    assert {"Options", "Message ids", "Input columns"} <= set(entries), entries
    article = dom.stdout[dom.stdout.index("<article"):]
    intro = article[article.index("</h1>"):article.index("<h2")]
    assert len(_text(intro).split()) >= 60, _text(intro)   # an introduction, then the options
