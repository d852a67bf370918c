"""Browser tests: the built sample site (and the shipped site) served on 127.0.0.1 and driven
by Playwright through the system's Chromium. Playwright never downloads a browser here.

Without Chromium the tests skip with the reason, except under CI (CI=true), where a missing
browser is a failure: CI installs it, so its absence means the install step broke.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "tests" / "fixtures" / "sample"
TEMPLATES = REPO / "templates"
EPOCH = "1790000000"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def chromium_path() -> str | None:
    found = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    return found if Path(found).is_file() else None


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI must install it (apt-get install -y chromium)", pytrace=False)
    pytest.skip(reason)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


@pytest.fixture(scope="session")
def serve() -> Iterator[Any]:
    """serve(folder) -> base URL of a static server on 127.0.0.1 for that folder."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(folder: Path) -> str:
        handler = functools.partial(_Quiet, directory=str(folder))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def sample_site(tmp_path_factory: pytest.TempPathFactory, serve: Any) -> str:
    """Base URL of the sample project built whole: `<base>public/`, `<base>member/`."""
    from curriculum.build import build

    out = tmp_path_factory.mktemp("sample-site")
    mp = pytest.MonkeyPatch()
    mp.setenv("SOURCE_DATE_EPOCH", EPOCH)
    try:
        build(SAMPLE, out_dir=out, templates=TEMPLATES, strict=True)
    finally:
        mp.undo()
    return serve(out)


@pytest.fixture(scope="session")
def shipped_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This repository's own site, every edition, built once for the session into a folder."""
    from curriculum.build import build

    out = tmp_path_factory.mktemp("shipped-site")
    build(REPO, out_dir=out)
    return out


@pytest.fixture(scope="session")
def shipped_site(shipped_build: Path, serve: Any) -> str:
    """Base URL of the shipped site (`<base>public/`, `<base>account/`, `<base>member/`)."""
    return serve(shipped_build)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    path = chromium_path()
    if path is None:
        _unavailable("Chromium is not installed (looked for /usr/bin/chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Tab:
    """A page in a fresh browser context that records console errors and uncaught exceptions."""

    def __init__(self, context: Any) -> None:
        self.context = context
        self.page = context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(
            f"{self.page.url}: {m.text}"))
        self.page.on("pageerror", lambda e: self.errors.append(f"{self.page.url}: {e}"))

    def goto(self, url: str) -> Any:
        self.page.goto(url, wait_until="load")
        return self.page


@pytest.fixture
def tab(browser: Any) -> Iterator[Tab]:
    context = browser.new_context(accept_downloads=True)
    t = Tab(context)
    yield t
    context.close()
    assert t.errors == [], "console errors:\n" + "\n".join(t.errors)


@pytest.fixture
def dark_tab(browser: Any) -> Iterator[Tab]:
    context = browser.new_context(color_scheme="dark")
    t = Tab(context)
    yield t
    context.close()
    assert t.errors == [], "console errors:\n" + "\n".join(t.errors)
