"""Fixtures of the browser tests: one headless Chromium per run, a `pydsh web` server per test, and pages that
fail the test on any console error or uncaught exception."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.apps.web.browser.harness import CHROMIUM_ARGS, MISSING_CHROMIUM, WebServer, chromium_path


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """Debian's Chromium through Playwright (never a downloaded browser); one per module, so Playwright's
    event loop is gone before the async tests of other directories run."""
    path = chromium_path()
    if path is None:
        pytest.fail(MISSING_CHROMIUM, pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def web(tmp_path: Path) -> Iterator[Callable[..., WebServer]]:
    """Start `pydsh web` on a scripted model; every server started is stopped with SIGTERM and must exit 0."""
    servers: list[WebServer] = []

    def start(scripts: list[Any], **kw: Any) -> WebServer:
        server = WebServer(tmp_path / f"s{len(servers)}", scripts, **kw)
        servers.append(server)
        return server

    yield start
    for server in servers:
        assert server.stop() == 0, server.stderr()


class Browser:
    """A signed-in page on a server, collecting console errors and page errors."""

    def __init__(self, chromium: Any, server: WebServer, *, color_scheme: str = "light", **context: Any) -> None:
        """`context` overrides options of the browser context (a phone's viewport, `has_touch`, a zoom's
        `device_scale_factor`)."""
        self.server = server
        self.errors: list[str] = []
        self.context = chromium.new_context(
            **{
                "viewport": {"width": 1400, "height": 900},
                "reduced_motion": "reduce",
                "color_scheme": color_scheme,
                "accept_downloads": True,
                **context,
            }
        )
        self.page = self.context.new_page()
        self.page.clock.set_fixed_time(time.time())
        self.outage = False
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self._sign_in(server)
        self.page.wait_for_selector("#new-session", state="attached")

    def _sign_in(self, server: WebServer) -> None:
        """The printed URL when its single-use token is unspent (keeping the cookie for later clients),
        else the cookie it gave, set in this context."""
        if server.cookie is None:
            self.page.goto(server.url)
            [cookie] = [c for c in self.context.cookies() if c["name"].startswith("pydsh-auth-")]
            server.cookie = (cookie["name"], cookie["value"])
            return
        name, value = server.cookie
        self.context.add_cookies([{"name": name, "value": value, "url": server.origin}])
        self.page.goto(f"{server.origin}/")

    def _console(self, message: Any) -> None:
        """Console errors fail the test, except failed loads while the test itself cuts the network."""
        if message.type != "error":
            return
        if self.outage and message.text.startswith("Failed to load resource: net::ERR_"):
            return
        self.errors.append(f"console: {message.text}")

    @contextlib.contextmanager
    def network_outage(self) -> Iterator[None]:
        """Cut the network (stream requests aborted, context offline) until the block ends."""
        self.outage = True
        self.page.route("**/stream*", lambda route: route.abort())
        self.context.set_offline(True)
        try:
            yield
        finally:
            self.context.set_offline(False)
            self.page.unroute("**/stream*")

    def end_outage(self) -> None:
        """Count failed loads as errors again (call once the page has reconnected)."""
        self.outage = False

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def browse(chromium: Any) -> Iterator[Callable[..., Browser]]:
    """Open signed-in pages; any console error or page error fails the test."""
    opened: list[Browser] = []

    def open_page(server: WebServer, **kw: Any) -> Browser:
        b = Browser(chromium, server, **kw)
        opened.append(b)
        return b

    yield open_page
    errors = [e for b in opened for e in b.errors]
    for b in opened:
        b.close()
    assert not errors, "\n".join(errors)
