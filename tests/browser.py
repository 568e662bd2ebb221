"""The report page as a real browser lays it out: Debian's headless chromium opens a copy
of the page with a measuring script added after the page's own, and hands back what it
measured (the tests skip where chromium is absent)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


NEEDS_CHROMIUM = pytest.mark.skipif(
    chromium() is None, reason="needs Debian's chromium (apt-get install chromium)"
)

# Runs after the page's own script. Every box is the axis-aligned box the browser gives
# (a rotated label's too), in CSS pixels of the window.
MEASURE = """<script>
(function(){
  var out={clipped:[],tables:{},sections:{},texts:{}};
  document.querySelectorAll('svg.chart').forEach(function(svg,i){
    var box=svg.getBoundingClientRect();
    svg.querySelectorAll('text').forEach(function(t){
      var r=t.getBoundingClientRect();
      if(r.left<box.left-0.5||r.right>box.right+0.5||r.top<box.top-0.5||r.bottom>box.bottom+0.5){
        out.clipped.push({chart:i,text:t.textContent,left:r.left-box.left,right:box.right-r.right});
      }
    });
  });
  var body=document.body.getBoundingClientRect();
  out.body={left:body.left,right:body.right};
  document.querySelectorAll('table').forEach(function(t,i){
    var r=t.getBoundingClientRect();out.tables[t.id||('table'+i)]={left:r.left,right:r.right};
  });
  document.querySelectorAll('[id]').forEach(function(e){out.texts[e.id]=e.textContent;});
  var pre=document.createElement('pre');pre.id='measured';
  pre.textContent=JSON.stringify(out);document.body.appendChild(pre);
})();
</script>"""


def measure(page: Path, tmp_path: Path, width: int = 1400) -> dict[str, Any]:
    """What chromium measured on ``page`` in a window ``width`` pixels wide."""
    html = page.read_text(encoding="utf-8")
    probe = tmp_path / f"measured-{page.stem}.html"
    probe.write_text(html.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    dom = subprocess.run(
        [
            str(chromium()),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--window-size={width},1000",
            "--dump-dom",
            probe.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    start = dom.index('<pre id="measured">') + len('<pre id="measured">')
    text = dom[start : dom.index("</pre>", start)]
    found: dict[str, Any] = json.loads(
        text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    )
    return found
