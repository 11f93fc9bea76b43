"""paper.html reads in a browser, on a desk and on a phone: headless Chromium opens it at 1280 and 420 px
wide; every figure loads, nothing logs an error, and the page never scrolls sideways (wide tables scroll
inside their own box). Screenshots land in build/browser/ for a person to look at."""
import html
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from analysis.paths import BUILD_DIR, REPO
from conftest import cli

pytestmark = pytest.mark.paper

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars"]
WIDTHS = (1280, 420)
SHOTS = BUILD_DIR / "browser"
# first thing in <head>: collect script errors, failed resources and console.error calls
HOOK = ("<script>window.__errors=[];addEventListener('error',function(e){__errors.push(String(e.message||"
        "((e.target&&(e.target.src||e.target.href))||'resource').slice(0,120)))},true);"
        "var __ce=console.error;console.error=function(){__errors.push([].join.call(arguments,' '));"
        "__ce.apply(console,arguments)};</script>")
# last thing in <body>: measure once everything has loaded, then report to the frame's parent
REPORT = ("<script>addEventListener('load',function(){var im=[].slice.call(document.images);var r={"
          "width:innerWidth,scroll:document.scrollingElement.scrollWidth,images:im.length,"
          "broken:im.filter(function(i){return !(i.complete&&i.naturalWidth>0)}).map(function(i){"
          "return (i.alt||i.src).slice(0,60)}),errors:__errors};parent.postMessage(JSON.stringify(r),'*')});"
          "</script>")
# Chromium will not make a window narrower than 500 px, so the page is opened in a frame exactly `width`
# px wide (its own viewport: innerWidth, media queries and scrolling are the frame's); the frame's report
# is written into the outer page's DOM, which --dump-dom prints.
FRAME = ("<!DOCTYPE html><html><body style='margin:0'><iframe src='page.html' style='border:0;width:{width}px;"
         "height:{height}px'></iframe><script>addEventListener('message',function(e){{var p=document."
         "createElement('pre');p.id='heapcost-check';p.textContent=e.data;document.body.appendChild(p)}})"
         "</script></body></html>")


def chromium(*args, profile: Path, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          text=True, timeout=timeout)


def check_page(page: Path, width: int) -> dict:
    """Open a copy of the page with the hooks at `width` px; what the page itself reported."""
    text = page.read_text()
    text = re.sub(r"<head>", lambda m: m.group(0) + HOOK, text, count=1)
    text = text.replace("</body>", REPORT + "</body>") if "</body>" in text else text + REPORT
    with tempfile.TemporaryDirectory(prefix="heapcost-browser-") as tmp:
        (Path(tmp) / "page.html").write_text(text)
        frame = Path(tmp) / "frame.html"
        frame.write_text(FRAME.format(width=width, height=900))
        done = chromium(f"--window-size={width + 40},960", "--virtual-time-budget=15000", "--dump-dom",
                        frame.as_uri(), profile=Path(tmp) / "profile")
    found = re.search(r'<pre id="heapcost-check">(.*?)</pre>', done.stdout, re.S)
    assert found, f"chromium reported nothing (exit {done.returncode}): {done.stderr[-800:]}"
    report = json.loads(html.unescape(found.group(1)))
    report["console"] = [l for l in done.stderr.splitlines() if "CONSOLE" in l and "Uncaught" in l]
    return report


def screenshot(page: Path, width: int, height: int, name: str) -> Path:
    """The top `height` px of the page at `width` px (in a frame of that width, as check_page)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    out = SHOTS / name
    with tempfile.TemporaryDirectory(prefix="heapcost-browser-") as tmp:
        shutil.copy(page, Path(tmp) / "page.html")
        frame = Path(tmp) / "frame.html"
        frame.write_text(FRAME.format(width=width, height=height))
        chromium(f"--window-size={max(width, 500)},{height}", "--virtual-time-budget=10000",
                 f"--screenshot={out}", frame.as_uri(), profile=Path(tmp) / "profile")
    return out


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: `make system-deps` installs the Debian package chromium")
    return CHROMIUM


@pytest.fixture(scope="module")
def paper_html(browser):
    page = REPO / "paper" / "paper.html"
    if not page.is_file():
        done = cli("paper", timeout=3000)
        assert done.returncode == 0, done.stderr[-2000:]
    return page


@pytest.mark.parametrize("width", WIDTHS)
def test_paper_reads_at_this_width(paper_html, width):
    report = check_page(paper_html, width)
    assert report["width"] == width
    assert report["images"] > 0 and report["broken"] == [], f"figures that did not load: {report['broken']}"
    assert report["errors"] == [] and report["console"] == [], f"errors: {report['errors'] + report['console']}"
    assert report["scroll"] <= report["width"], (
        f"the page scrolls sideways at {width} px: {report['scroll']} px of content")
    shot = screenshot(paper_html, width, 2400 if width < 800 else 1600, f"paper-{width}.png")
    assert shot.stat().st_size > 0


def test_the_check_sees_a_page_that_scrolls_sideways_and_a_broken_figure(browser, tmp_path):
    """The checks can fail: a planted over-wide block and a missing image are reported."""
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><html><head><meta name='viewport' content='width=device-width'></head><body>"
                    "<div style='width:2000px'>wide</div><img alt='missing' src='missing.png'>"
                    "<script>console.error('planted')</script></body></html>")
    report = check_page(page, 420)
    assert report["scroll"] > report["width"] == 420
    assert report["broken"] == ["missing"]
    assert "planted" in " ".join(report["errors"])
