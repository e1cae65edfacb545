"""The ``aworld-train view`` command: a local web page of runs. :mod:`aworld_train.cli`
registers it; errors reach its one-line handler."""

from __future__ import annotations

from pathlib import Path

import click

from aworld_train.errors import JobError

# The folder a job writes its runs to unless it says otherwise.
_DEFAULT_RUNS = Path("runs")


@click.command("view")
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; one other than loopback needs --token.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    help="Port to listen on (default: a free one).",
)
@click.option(
    "--token",
    help="A secret every request must carry (?token=...); needed with a --host other than "
    "loopback.",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the page in a browser.")
@click.option(
    "--html",
    "html_file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the run PATH as one self-contained HTML file instead of serving.",
)
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def view_command(
    path: Path | None,
    host: str,
    port: int,
    token: str | None,
    open_browser: bool,
    html_file: Path | None,
    debug: bool,
) -> None:
    """Look at runs in a browser: every run under PATH (a run directory, or a folder holding
    runs; default: ./runs), their curves live while they train, their episodes, runs side by
    side. Serves until Ctrl-C."""
    from aworld_train import view

    folder = path if path is not None else _DEFAULT_RUNS
    if path is None and not folder.is_dir():
        raise JobError(
            "no runs folder here (./runs): give PATH, a run directory or a folder holding runs"
        )
    if not folder.is_dir():
        raise JobError(f"{folder}: not a folder: give a run directory or a folder holding runs")
    if html_file is not None:
        view.export_html(folder, html_file)
        click.echo(f"wrote {html_file}")
        return
    if not view.is_loopback(host) and not token:
        raise JobError(
            f"--host {host} is reachable from other machines: give --token too, a secret "
            "every request must carry"
        )
    sock = view.open_socket(host, port)
    url = view.url_of(sock, token)
    # The token is the user's own, shown once so the page can be opened; it is not logged.
    click.echo(f"viewing {folder.resolve()} at {url} (Ctrl-C stops)", err=False)
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    view.serve(folder, sock, token)
