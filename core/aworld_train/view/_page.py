"""The page's HTML: one template (``static/index.html``) that the server fills with links to
its scripts and the static export fills with the scripts and the data themselves."""

from __future__ import annotations

import html
import json
from importlib import resources
from pathlib import Path
from typing import Any

# The page's own files, served under /static/ by these names (nothing else is served).
OWN_FILES = ("app.js", "app.css")
PLOTLY = "plotly.min.js"


def static_text(name: str) -> str:
    """One of the page's files: its own, or plotly's bundled ``plotly.min.js`` (the browser
    draws the curves with it; nothing is fetched from the network)."""
    if name == PLOTLY:
        return plotly_js_path().read_text(encoding="utf-8")
    return resources.files("aworld_train.view").joinpath("static").joinpath(name).read_text("utf-8")


def plotly_js_path() -> Path:
    """Where the installed plotly keeps its bundled JavaScript (plotly is not imported: only
    this file is read)."""
    from importlib.util import find_spec

    spec = find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        from aworld_train.errors import JobError

        raise JobError(
            "aworld-train view draws with plotly, which is not installed: pip install plotly"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "package_data" / PLOTLY


def served_page(query: str) -> str:
    """The page as the server sends it: its scripts linked, each link carrying ``query`` (the
    token, where one is needed)."""
    query = html.escape(query, quote=True)
    head = "\n".join(
        [
            f'<link rel="stylesheet" href="static/app.css{query}">',
            f'<script src="static/{PLOTLY}{query}"></script>',
            f'<script src="static/app.js{query}"></script>',
        ]
    )
    return _fill(head)


def exported_page(answers: dict[str, Any], start: str) -> str:
    """The page as one file: its scripts inlined, and the answers to every question it asks
    (keyed by the question's URL), opening at ``start`` (a page's address after ``#``)."""
    data = {"answers": answers, "start": start}
    head = "\n".join(
        [
            f"<style>{static_text('app.css')}</style>",
            _inline_script(static_text(PLOTLY)),
            _inline_script(f"window.VIEW_EXPORT = {json.dumps(data, ensure_ascii=False)};"),
            _inline_script(static_text("app.js")),
        ]
    )
    return _fill(head)


def _inline_script(text: str) -> str:
    # "</script" inside the text would end the element early.
    return "<script>" + text.replace("</script", "<\\/script") + "</script>"


def _fill(head: str) -> str:
    template = static_text("index.html")
    return template.replace("<!--head-->", head, 1)
