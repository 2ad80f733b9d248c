"""A real headless browser for the tests: Debian's Chromium driven over the DevTools protocol.

:func:`open_page` starts ``chromium --headless`` on a private profile, sets cookies, loads a URL,
waits for the load event, and returns the console errors / uncaught exceptions the page raised and
a PNG screenshot. No Selenium or Playwright (their browser downloads need the internet).
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect


def chromium() -> str | None:
    """The Chromium executable, or None (``apt-get install chromium`` provides it)."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageVisit:
    status: int | None = None
    errors: list[str] = field(default_factory=list)
    """Console errors, uncaught exceptions and failed loads, as text."""
    screenshot: bytes = b""
    title: str = ""
    until_met: bool = False
    """Whether the ``until`` expression became true (True when none was given)."""


class _Cdp:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=60))
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))
            self.events.append(message)

    def wait_event(self, method: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        for event in self.events:
            if event.get("method") == method:
                return event
        while time.monotonic() < deadline:
            message: dict[str, Any] = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            self.events.append(message)
            if message.get("method") == method:
                return message
        raise TimeoutError(f"no {method} within {timeout}s")


def open_page(
    url: str, cookies: dict[str, str], profile: Path, until: str | None = None, size: str = "1400,1800"
) -> PageVisit:
    """Load ``url`` in headless Chromium with ``cookies`` set for its origin; with ``until`` (a
    JavaScript expression), also wait up to 30 s for it to be true (a client-rendered app)."""
    exe = chromium()
    assert exe is not None, "no chromium"
    profile.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [
            exe,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            f"--window-size={size}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(profile / "chromium.log").open("wb"),
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.is_file() or not port_file.read_text().strip():
            assert proc.poll() is None, f"chromium exited: {(profile / 'chromium.log').read_text()[-2000:]}"
            assert time.monotonic() < deadline, "chromium never opened its DevTools port"
            time.sleep(0.2)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as reply:
            targets = json.loads(reply.read())
        page = next(t for t in targets if t.get("type") == "page")
        with connect(page["webSocketDebuggerUrl"], max_size=64 * 1024 * 1024) as ws:
            return _visit(_Cdp(ws), url, cookies, until)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def _visit(cdp: _Cdp, url: str, cookies: dict[str, str], until: str | None) -> PageVisit:
    for domain in ("Page", "Network", "Runtime", "Log"):
        cdp.call(f"{domain}.enable")
    for name, value in cookies.items():
        cdp.call("Network.setCookie", name=name, value=value, url=url)
    cdp.call("Page.navigate", url=url)
    cdp.wait_event("Page.loadEventFired")
    visit = PageVisit(until_met=until is None)
    deadline = time.monotonic() + 30
    while until is not None and not visit.until_met and time.monotonic() < deadline:
        result = cdp.call("Runtime.evaluate", expression=f"Boolean({until})")["result"]
        visit.until_met = result.get("value") is True
        time.sleep(0.3)
    time.sleep(0.5)  # late console messages
    cdp.call("Runtime.evaluate", expression="1")  # drains pending events into cdp.events
    for event in cdp.events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Network.responseReceived" and params.get("type") == "Document":
            visit.status = int(params["response"]["status"])
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            visit.errors.append(
                " ".join(str(a.get("value", a.get("description"))) for a in params.get("args", []))
            )
        elif method == "Runtime.exceptionThrown":
            visit.errors.append(str(params.get("exceptionDetails", {}).get("text")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            visit.errors.append(f"{params['entry'].get('text')} {params['entry'].get('url', '')}")
        elif method == "Network.loadingFailed":
            visit.errors.append(f"load failed: {params.get('errorText')}")
    visit.title = str(cdp.call("Runtime.evaluate", expression="document.title")["result"].get("value", ""))
    shot = cdp.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
    visit.screenshot = base64.b64decode(shot["data"])
    return visit
