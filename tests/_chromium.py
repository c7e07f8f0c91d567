"""Headless Chromium driven over the DevTools protocol on a pipe (no websocket, no
package): open a page offline, record every request it makes and every script error,
take a full-page screenshot, print it to PDF, and give back its DOM.

Used by tests/test_report_browser.py and docs/examples/make_report.py.  The browser
runs with name resolution off (``--host-resolver-rules="MAP * ~NOTFOUND"``), so a page
that tries to load something from the network fails to -- and the attempt is still seen
(``Network.requestWillBeSent``), which is what the tests assert never happens.
"""
from __future__ import annotations

import base64
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium():
    """The browser's path, or None."""
    env = os.environ.get("SPATIALHUB_CHROMIUM")
    if env:
        return env if shutil.which(env) or os.path.isfile(env) else None
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless browser; ``open(url)`` renders a page and returns what it saw."""

    def __init__(self, path=None, *, width=1200, height=900, timeout=60.0):
        self.path = path or find_chromium()
        if self.path is None:
            raise FileNotFoundError("no chromium on PATH")
        self.width, self.height, self.timeout = width, height, timeout
        self.profile = tempfile.mkdtemp(prefix="spatialhub-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def fds():     # the protocol's pipe: the browser reads fd 3 and writes fd 4
            a, b = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        cmd = [self.path, "--headless", "--no-sandbox", "--disable-gpu",
               "--remote-debugging-pipe", "--host-resolver-rules=MAP * ~NOTFOUND",
               f"--user-data-dir={self.profile}", "--no-first-run",
               "--no-default-browser-check", "--disable-extensions", "--disable-sync",
               "--disable-background-networking", "--disable-component-update",
               "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
               f"--window-size={width},{height}"]
        # (close_fds would close 3 and 4 after fds() ran; the other descriptors of this
        # process are not inheritable, so only those two cross)
        # the sanitizer run preloads libasan into this process: the browser is not ours
        # to check (its own allocator, its own leaks in the logs judged afterwards)
        env = {k: v for k, v in os.environ.items()
               if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS",
                            "PYTHONMALLOC")}
        self.proc = subprocess.Popen(cmd, preexec_fn=fds, close_fds=False, env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        os.close(to_child_r)
        os.close(from_child_w)
        self._inbox = queue.Queue()
        self._events = []
        self._next = 0
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()

    # ---- the protocol ---------------------------------------------------------------

    def _read(self):
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_child, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                self._inbox.put(None)
                return
            buf += chunk
            while b"\0" in buf:
                msg, buf = buf.split(b"\0", 1)
                self._inbox.put(json.loads(msg))

    def send(self, method, params=None, session=None):
        self._next += 1
        ident = self._next
        msg = {"id": ident, "method": method, "params": params or {}}
        if session is not None:
            msg["sessionId"] = session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            m = self._take(deadline, f"an answer to {method}")
            if m.get("id") == ident:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self._events.append(m)

    def _take(self, deadline, what):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"chromium: no {what} within {self.timeout:g} s")
        try:
            m = self._inbox.get(timeout=left)
        except queue.Empty:
            raise TimeoutError(f"chromium: no {what} within {self.timeout:g} s") from None
        if m is None:
            raise RuntimeError(f"chromium exited (status {self.proc.poll()}) before {what}")
        return m

    def wait_for(self, method, session):
        deadline = time.monotonic() + self.timeout
        for i, m in enumerate(self._events):
            if m.get("method") == method and m.get("sessionId") == session:
                return self._events.pop(i)
        while True:
            m = self._take(deadline, method)
            if m.get("method") == method and m.get("sessionId") == session:
                return m
            self._events.append(m)

    # ---- one page -------------------------------------------------------------------

    def open(self, url, *, screenshot=None, pdf=None, settle=0.3):
        """Render ``url``; returns {"html": the DOM serialised, "requests": [URLs asked
        for], "errors": [script exceptions and error log entries], "height": the page's
        height in CSS px, "pdf_pages": pages printed (None when not asked)}."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget",
                            {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1,
                   "mobile": False}, session=session)
        self._events = [m for m in self._events if m.get("sessionId") != session]
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_for("Page.loadEventFired", session)
        time.sleep(settle)    # late requests (fonts, lazy images) would start by now
        root = self.send("DOM.getDocument", {"depth": -1}, session=session)["root"]
        html = self.send("DOM.getOuterHTML", {"nodeId": root["nodeId"]},
                         session=session)["outerHTML"]
        metrics = self.send("Page.getLayoutMetrics", session=session)
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        height = int(size["height"])
        if screenshot is not None:
            shot = self.send("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": self.width,
                         "height": screenshot[1] if isinstance(screenshot, tuple) else height,
                         "scale": 1}}, session=session)
            path = screenshot[0] if isinstance(screenshot, tuple) else screenshot
            Path(path).write_bytes(base64.b64decode(shot["data"]))
        pages = None
        if pdf is not None:
            data = base64.b64decode(self.send("Page.printToPDF", {"printBackground": True},
                                              session=session)["data"])
            Path(pdf).write_bytes(data)
            pages = data.count(b"/Type /Page") - data.count(b"/Type /Pages")
        # everything the page asked for, and every error it met, in order
        requests, errors = [], []
        for m in self._events:
            if m.get("sessionId") != session:
                continue
            p = m.get("params", {})
            if m.get("method") == "Network.requestWillBeSent":
                requests.append(p["request"]["url"])
            elif m.get("method") == "Runtime.exceptionThrown":
                errors.append(p["exceptionDetails"].get("text", "exception"))
            elif m.get("method") == "Log.entryAdded" and p["entry"]["level"] == "error":
                errors.append(p["entry"].get("text", "error"))
            elif m.get("method") == "Runtime.consoleAPICalled" and p.get("type") == "error":
                errors.append("console.error")
        self.send("Target.closeTarget", {"targetId": target})
        return {"html": html, "requests": requests, "errors": errors, "height": height,
                "pdf_pages": pages}

    def close(self):
        try:
            if self.proc.poll() is None:
                try:
                    self.send("Browser.close")
                except (RuntimeError, TimeoutError, OSError):
                    pass
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            for fd in (self._to_child, self._from_child):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
