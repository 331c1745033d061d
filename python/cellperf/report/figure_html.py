"""The report's figures in its HTML page: each figure's data as inert JSON beside an empty box
of the figure's height, and one script that draws a figure when it comes near the view.

Why: plotly.js is 4.8 MB of script, and drawing every figure while the page loads kept the
demo's report blank for 11-25 s on a busy host. The page now shows its text and tables at once,
plotly.js is evaluated once after the `load` event, and each figure is drawn as the reader
scrolls to it (all of them before printing). The boxes have the figures' heights, so the page
does not jump as they are drawn (docs/report.md)."""

from __future__ import annotations

import functools
import html
import json
import re
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

#: plotly.js's cartesian bundle (npm plotly.js-cartesian-dist-min, MIT licence, the version the
#: installed plotly ships): 1.5 MB against 4.8, and a third of the time to evaluate (the demo's
#: first figures drawn 2.7-3.9 s after opening instead of 4.3-6.8 s on a busy host). Used when
#: every trace of the page is of a type it has and its version is plotly's own.
CARTESIAN_JS = Path(__file__).with_name("plotly-cartesian.min.js")
CARTESIAN_TYPES = frozenset({"bar", "box", "contour", "heatmap", "histogram", "histogram2d", "histogram2dcontour",
                             "image", "pie", "scatter", "scatterternary", "violin"})

#: The height of a figure without one in its layout (plotly's default).
DEFAULT_HEIGHT = 450


#: Templates sent once per page instead of once per figure (~8 kB each): the report's figures use
#: plotly_white (item.layout).
SHARED_TEMPLATES = ("plotly_white",)


def _json(value) -> str:
    """JSON safe inside a <script> element."""
    return json.dumps(value, separators=(",", ":")).replace("</", "<\\/")


def figure_div(key: str, figure) -> str:
    """The figure's box and its data (a shared template goes once per page, in `page_scripts`)."""
    spec = json.loads(pio.to_json(figure, validate=False))
    template = spec["layout"].get("template")
    shared = next((name for name in SHARED_TEMPLATES if template == _templates()[name]), "")
    if shared:
        del spec["layout"]["template"]
    height = int(spec["layout"].get("height") or DEFAULT_HEIGHT)
    fid = html.escape(f"fig-{key}")
    return (f'<div class="plot" id="{fid}" data-key="{html.escape(key)}" data-template="{shared}" '
            f'style="height:{height}px"></div><script type="application/json" id="{fid}-data">{_json(spec)}</script>')


@functools.cache
def _templates() -> dict:
    return {name: json.loads(pio.to_json(go.Figure(layout={"template": name}), validate=False))["layout"]["template"]
            for name in SHARED_TEMPLATES}


# Draws a figure when its box is within a screen of the view; before printing, all of them.
# plotly.js is evaluated after `load` from its inert copy so that the text shows first.
_LOADER = """
(function(){
  var templates = JSON.parse(document.getElementById('plotly-templates').textContent);
  function draw(el){
    if (el.dataset.drawn) return;
    el.dataset.drawn = '1';
    var spec = JSON.parse(document.getElementById(el.id + '-data').textContent);
    if (el.dataset.template) spec.layout.template = templates[el.dataset.template];
    Plotly.newPlot(el, spec.data, spec.layout, {displaylogo: false, responsive: true,
      toImageButtonOptions: {format: 'png', filename: el.dataset.key, scale: 2}});
  }
  function start(){
    var js = document.createElement('script');
    js.textContent = document.getElementById('plotly-js').textContent;
    document.head.appendChild(js);
    var boxes = document.querySelectorAll('div.plot');
    var seen = new IntersectionObserver(function(entries){
      entries.forEach(function(e){ if (e.isIntersecting){ seen.unobserve(e.target); draw(e.target); } });
    }, {rootMargin: '100% 0px'});
    boxes.forEach(function(el){ seen.observe(el); });
    window.addEventListener('beforeprint', function(){ boxes.forEach(draw); });
  }
  // After the load event has finished, so that the page counts as loaded once its text is shown.
  if (document.readyState === 'complete') start();
  else window.addEventListener('load', function(){ setTimeout(start, 0); });
})();
"""


def _version(js: str) -> str | None:
    found = re.search(r"plotly\.js (?:\(\w+ - minified\) )?v(\d+\.\d+\.\d+)", js[:500])
    return found.group(1) if found else None


def plotly_js(trace_types: set[str]) -> str:
    """The smallest plotly.js bundle that draws traces of these types."""
    full = get_plotlyjs()
    if trace_types <= CARTESIAN_TYPES and CARTESIAN_JS.exists():
        cartesian = CARTESIAN_JS.read_text()
        if _version(cartesian) == _version(full):
            return cartesian
    return full


def page_scripts(trace_types: set[str]) -> str:
    """plotly.js (inert until the page has loaded), the figures' shared template and the
    script that draws them: once per page, at the end of its body."""
    js = plotly_js(trace_types).replace("</script", "<\\/script")  # none today; a closing tag would end it
    return (f'<script type="text/plain" id="plotly-js">{js}</script>'
            f'<script type="application/json" id="plotly-templates">{_json(_templates())}</script>'
            f"<script>{_LOADER}</script>")
