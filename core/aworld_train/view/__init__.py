"""``aworld-train view``: a local web page of runs — every run under a folder, a run's curves
updating while it trains, its recorded episodes token by token, runs side by side — and the
same page of one run as a single HTML file.

The server (:mod:`.server`, aiohttp) answers the page's questions (:mod:`.api`) from the run
directories (:mod:`.runs`), reading their growing files a piece at a time (:mod:`.jsonl`). The
page (``static/``) draws with plotly's bundled JavaScript, so nothing comes from the network.
"""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aworld_train.errors import JobError, RunDirectoryError
from aworld_train.run.files import MANIFEST
from aworld_train.view._runs import RunFolder

__all__ = ["export_html", "is_loopback", "open_socket", "serve"]


def is_loopback(host: str) -> bool:
    """Whether only this machine reaches ``host``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def open_socket(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (0: a free port).

    :raises JobError: when it cannot be bound, naming the address.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise JobError(
            f"--host {host} --port {port}: cannot listen there ({exc.strerror})"
        ) from None
    return sock


def url_of(sock: socket.socket, token: str | None) -> str:
    """The page's address on ``sock``, carrying ``token``."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"?token={quote(token)}" if token else "")


def serve(folder: Path, sock: socket.socket, token: str | None) -> None:
    """Serve the runs under ``folder`` on ``sock`` until interrupted (Ctrl-C)."""
    from aiohttp import web

    from aworld_train.view._server import make_app

    # No access log: a request's URL carries the token.
    web.run_app(
        make_app(RunFolder(folder), token),
        sock=sock,
        print=None,
        handle_signals=True,
        access_log=None,
    )


def export_html(run_dir: Path, target: Path) -> None:
    """Write the page of the run ``run_dir`` as one HTML file, ``target``.

    :raises RunDirectoryError: when ``run_dir`` is not a run directory.
    :raises JobError: when ``target`` cannot be written.
    """
    from aworld_train.view import _api as api
    from aworld_train.view._page import exported_page

    if not (run_dir / MANIFEST).is_file():
        raise RunDirectoryError(f"{run_dir} is not a run directory (it holds no {MANIFEST})")
    folder = RunFolder(run_dir)
    run = {"run": "."}
    answers: dict[str, Any] = {
        "runs": api.runs(folder, {}),
        "run?run=.": api.run(folder, run),
        "metrics?run=.&after=0": _whole_metrics(folder),
        "samples?run=.": api.samples(folder, run),
    }
    for row in answers["samples?run=."]["samples"]:
        answers[f"sample?run=.&index={row['index']}"] = api.sample(
            folder, {**run, "index": str(row["index"])}
        )
    try:
        target.write_text(exported_page(answers, start="run/."), encoding="utf-8")
    except OSError as exc:
        raise JobError(f"--html {target}: cannot write it ({exc.strerror})") from None


def _whole_metrics(folder: RunFolder) -> Any:
    """Every curve of the run, however large (a large run answers a preview first)."""
    from aworld_train.view import _api as api

    answer = api.metrics(folder, {"run": ".", "after": "0"})
    return api.metrics(folder, {"run": ".", "after": "0"}) if answer.get("partial") else answer
