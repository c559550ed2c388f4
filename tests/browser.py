"""Test utility: a folder served over HTTP and headless Chromium driven by selenium, for the slow page tests."""

from __future__ import annotations

import contextlib
import functools
import http.server
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest


def chromium() -> str | None:
    return next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


NEEDS_CHROMIUM = pytest.mark.skipif(
    chromium() is None or shutil.which("chromedriver") is None,
    reason="no Chromium and chromedriver on this machine (Debian: chromium chromium-driver)",
)


@contextlib.contextmanager
def served(folder: str | Path) -> Iterator[str]:
    """``folder`` over HTTP on a free local port (a page's fetches, which a file:// page may not make); yields its
    address."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@contextlib.contextmanager
def browser():
    """Headless Chromium with its console log kept; skips the test where selenium is not installed."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="pip install selenium")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(shutil.which("chromedriver")))
    try:
        yield driver
    finally:
        driver.quit()
