"""The first screen of a study's HTML report as a browser lays it out (headless Chromium).

    python tests/report_screen.py results/digits_grid/report.html [--png first-screen.png] [--size 1280x800]

prints, as JSON, where the answer's title, its first paragraph and its inline figures lie in the window, the
elements that scroll on their own (a box with its own scroll bar: which one holds the answer, or lies inside
it) and what the report's typography puts before inline code; with ``--png``, a screenshot of that screen.
tests/test_living_study.py checks the report of the shrunken default study with it. Needs Chromium
(Debian's package ``chromium``; .ci/run installs it)."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Chromium as a test runs it: no sandbox (root), no GPU, none of its calls out to the network, which this
# machine refuses many at a time.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
# Run in the page once Snakemake's report has drawn its first page: the layout, written into the DOM that
# --dump-dom prints.
_MEASURE = """<script>
window.addEventListener("load", () => setTimeout(() => {
  const answer = document.getElementById("ganstudy-answer");
  const rect = (e) => {
    const r = e.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom, left: r.left, right: r.right};
  };
  const own = [...document.querySelectorAll("*")].filter((e) => {
    const style = getComputedStyle(e);
    return /(auto|scroll)/.test(style.overflowY) && e.scrollHeight > e.clientHeight + 1;
  });
  const layout = {
    window: {width: innerWidth, height: innerHeight},
    found: answer !== null,
    title: answer && rect(answer.querySelector("h1")),
    answer: answer && rect(answer.querySelector("h1 + p")),
    figures: answer ? [...answer.querySelectorAll("img")].map((img) => ({alt: img.alt, ...rect(img)})) : [],
    scrolling: own.map((e) => ({
      tag: e.tagName,
      class: String(e.className),
      align: getComputedStyle(e).alignItems,
      holds_answer: !!answer && e.contains(answer),
      inside_answer: !!answer && answer.contains(e) && e !== answer,
    })),
    before_code: answer ? [...answer.querySelectorAll("code")].map((c) => getComputedStyle(c, "::before").content) : [],
  };
  document.body.setAttribute("data-layout", JSON.stringify(layout));
}, 1000));
</script>"""


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def first_screen(report: Path, size: tuple[int, int] = (1280, 800), png: Path | None = None) -> dict:
    """The layout of ``report``'s first screen in a ``size`` window (see the module's text); ``png``: a
    screenshot of it."""
    browser = chromium()
    assert browser, "no Chromium: apt-get install chromium"
    html = report.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="report-screen-") as folder:
        measured = Path(folder, "report.html")
        # The last </body>: the report's scripts hold the text too.
        head, end, tail = html.rpartition("</body>")
        measured.write_text(head + _MEASURE + "\n" + end + tail, encoding="utf-8")
        command = [
            browser,
            *FLAGS,
            f"--user-data-dir={Path(folder, 'profile')}",
            f"--window-size={size[0]},{size[1]}",
            "--virtual-time-budget=15000",
        ]
        dom = subprocess.run(
            [*command, "--dump-dom", measured.as_uri()], capture_output=True, text=True, timeout=120, check=True
        ).stdout
        if png is not None:
            subprocess.run(
                [*command, f"--screenshot={png.resolve()}", report.resolve().as_uri()],
                capture_output=True,
                timeout=120,
                check=True,
            )
    found = re.search(r'<body[^>]*data-layout="([^"]*)"', dom)
    assert found, "the report did not draw its first page within the browser's time"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--png", type=Path)
    parser.add_argument("--size", default="1280x800", help="the window, WIDTHxHEIGHT")
    args = parser.parse_args()
    width, height = map(int, args.size.split("x"))
    print(json.dumps(first_screen(args.report, (width, height), args.png), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
