"""Regenerate docs/screenshot.png, the README's view of the session page (`make screenshot`).

Everything happens in a throwaway data directory (CTXWEB_DATA_DIR), so the user's own
database and files are untouched: `migrate`, `ensure_admin` (its printed password is used to
log in), `seed_demo` with the built-in demo transcripts, then `devserver --noreload` on a free
port of 127.0.0.1. Debian's chromium (headless, through Playwright; no browser is downloaded,
nothing needs the internet) logs in, opens the synthetic long-running demo session (the one
with nested compactions), opens the top-level compaction marker's originals and the summary
of the marker nested in them, and takes a 1440x1180 screenshot of the top of the page. The
steps follow tests/browser/test_ui.py::test_screenshot_for_the_readme.

Usage: .venv/bin/python scripts/readme_screenshot.py [--output PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import ViewportSize

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "screenshot.png"
CHROMIUM = Path("/usr/bin/chromium")
#: As tests/browser/conftest.py launches it: no sandbox (root in containers), no network of its own.
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT: ViewportSize = {"width": 1440, "height": 1180}
USERNAME = "admin"
#: The synthetic demo session (sessions_app/demo/synthetic.py TITLE), found by this prefix.
SESSION_TITLE = "Demo: long-running coding agent"
SERVER_START_SECONDS = 60.0
TIMEOUT_MS = 30_000


def child_environment(data_dir: Path) -> dict[str, str]:
    """This process's environment without any setting that could reach the user's data (a
    DATABASE_URL, a storage backend, a cache server, a samples folder), with the data dir."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("CTXWEB_", "DJANGO_")) and name != "DATABASE_URL"
    }
    env["CTXWEB_DATA_DIR"] = str(data_dir)
    # The built-in demo transcripts (sessions_app/demo): the same screenshot on every machine.
    env["CTXWEB_SAMPLES_DIR"] = str(data_dir / "no-samples")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def manage(env: dict[str, str], *args: str) -> str:
    """Run `manage.py ARGS` to completion and return its standard output."""
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        sys.stderr.write(result.stdout + result.stderr)
        raise SystemExit(f"manage.py {' '.join(args)} failed ({result.returncode})")
    return result.stdout


def admin_password(output: str) -> str:
    """The password `ensure_admin` printed when it created the user."""
    found = re.search(r"with password: (\S+)", output)
    if found is None:
        raise SystemExit(f"ensure_admin printed no password: {output.strip()!r}")
    return found.group(1)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def running_server(env: dict[str, str], log: Path) -> Iterator[str]:
    """`manage.py devserver` on a free port, stopped (its whole process group) on exit."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, "manage.py", "devserver", f"127.0.0.1:{port}", "--noreload"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            wait_until_answering(server, f"{url}/accounts/login/", log)
            yield url
        finally:
            stop(server)


def wait_until_answering(server: subprocess.Popen[Any], url: str, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.stderr.write(log.read_text())
            raise SystemExit(f"the server exited ({server.returncode}) before answering")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.25)
    sys.stderr.write(log.read_text())
    raise SystemExit(f"the server did not answer {url} within {SERVER_START_SECONDS:.0f} s")


def stop(server: subprocess.Popen[Any]) -> None:
    """SIGTERM to the server's process group, SIGKILL if it is still there after 10 s."""
    if server.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def marker_button(number: str, which: str) -> str:
    """The Summary or Originals expander of marker `number` (as in tests/browser/test_ui.py)."""
    attribute = "[data-originals]" if which == "originals" else ":not([data-originals])"
    return f"#compaction-{number} > .marker-row button.expander{attribute}"


def wait_for_htmx_idle(page: Any) -> None:
    """No htmx request in flight and nothing swapping or settling (tests/browser/conftest.py)."""
    busy = "document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling') !== null"
    page.wait_for_function(f"() => !({busy})", timeout=TIMEOUT_MS)


def take_screenshot(url: str, password: str, output: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=LAUNCH_ARGS
        )
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(f"{url}/accounts/login/")
            page.fill("input[name=username]", USERNAME)
            page.fill("input[name=password]", password)
            page.click("button[type=submit]")
            page.wait_for_url(f"{url}/")
            page.locator(".session-link", has_text=SESSION_TITLE).first.click()
            page.wait_for_selector("#history")
            wait_for_htmx_idle(page)
            outer = page.locator("#history-items > [data-compaction]").first
            outer_number = outer.get_attribute("data-compaction")
            if outer_number is None:
                raise SystemExit("the demo session shows no compaction marker")
            page.locator(marker_button(outer_number, "originals")).click()
            nested = page.locator(f"#c{outer_number}-originals [data-compaction]").first
            nested.wait_for()
            inner_number = nested.get_attribute("data-compaction")
            if inner_number is None:
                raise SystemExit(f"marker #{outer_number} has no nested marker")
            page.locator(marker_button(inner_number, "summary")).click()
            page.locator(f"#c{inner_number}-summary .summary-text").wait_for()
            wait_for_htmx_idle(page)
            page.evaluate("window.scrollTo(0, 0)")
            output.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(output))
        finally:
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"default: {OUTPUT}")
    output = parser.parse_args().output.resolve()
    if not CHROMIUM.exists():
        raise SystemExit(f"{CHROMIUM} is not installed (`make chromium` installs it)")
    with tempfile.TemporaryDirectory(prefix="ctxweb-screenshot-") as temporary:
        data_dir = Path(temporary)
        env = child_environment(data_dir)
        manage(env, "migrate", "--no-input")
        password = admin_password(manage(env, "ensure_admin", "--username", USERNAME))
        manage(env, "seed_demo", "--owner", USERNAME)
        with running_server(env, data_dir / "server.log") as url:
            take_screenshot(url, password, output)
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
