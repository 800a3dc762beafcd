"""Headless Chromium for the report tests, driven over the DevTools protocol through a pipe
(``--remote-debugging-pipe``: no extra package): load a page, collect console errors and uncaught
exceptions, evaluate a script in it, and take a full-page screenshot. Skips (pytest) when no
Chromium is installed; .ci/run installs one."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
BINARIES = ("/usr/lib/chromium/chromium",)   # Debian's binary behind its launcher script


def have_browser() -> bool:
    return any(os.access(p, os.X_OK) for p in BINARIES) or any(map(shutil.which, BROWSERS))


def browser() -> str:
    for path in BINARIES:
        if os.access(path, os.X_OK):
            return path
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no headless Chromium (Debian: apt-get install chromium; .ci/run does it)")


@dataclass(frozen=True)
class Loaded:
    value: object                  # what the evaluated script returned
    console: tuple[str, ...]       # console errors/warnings and uncaught exceptions
    screenshot: Path


class _Pipe:
    def __init__(self, exe: str, profile: Path) -> None:
        to_child_r, self._w = os.pipe()
        self._r, from_child_w = os.pipe()

        def fds() -> None:          # the protocol's fds in the child: 3 reads, 4 writes
            r, w = os.dup(to_child_r), os.dup(from_child_w)    # above 4: dup2 cannot clobber
            os.dup2(r, 3)
            os.dup2(w, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--disable-extensions", "--remote-debugging-pipe",
             f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=open(profile.parent / 'chromium.log', 'w'), preexec_fn=fds,
            close_fds=False)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf, self._id, self.events = b"", 0, []

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 60.0) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            reply = self._next(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)
        raise TimeoutError(method)

    def wait_for(self, method: str, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        for e in self.events:
            if e.get("method") == method:
                return e
        while time.monotonic() < deadline:
            e = self._next(deadline)
            self.events.append(e)
            if e.get("method") == method:
                return e
        raise TimeoutError(method)

    def _next(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError("no message from Chromium")
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self._w)
        os.close(self._r)


def load(page: Path, shot: Path, script: str = "null", width: int = 1100) -> Loaded:
    """Open ``page``, wait for its load event, evaluate ``script`` (its value comes back) and save
    a full-page screenshot to ``shot``."""
    cdp = _Pipe(browser(), shot.parent / "chromium-profile")
    try:
        target = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        sid = cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            cdp.send(f"{domain}.enable", session=sid)
        cdp.send("Emulation.setDeviceMetricsOverride",
                 {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                 session=sid)
        cdp.send("Page.navigate", {"url": page.resolve().as_uri()}, session=sid)
        cdp.wait_for("Page.loadEventFired")
        value = cdp.send("Runtime.evaluate", {"expression": script, "returnByValue": True},
                         session=sid)["result"].get("value")
        png = cdp.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True},
                       session=sid)["data"]
        shot.write_bytes(base64.b64decode(png))
        console = []
        for e in cdp.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                console.append(" ".join(str(a.get("value", a.get("description", "")))
                                        for a in p.get("args", ())))
            elif m == "Runtime.exceptionThrown":
                console.append(p.get("exceptionDetails", {}).get("text", "exception"))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
                console.append(p["entry"].get("text", ""))
        return Loaded(value, tuple(console), shot)
    finally:
        cdp.close()


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit truecolour PNG, as Chromium writes it."""
    import struct
    import zlib

    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def coloured_pixels(data: bytes, box: dict) -> int:
    """How many pixels inside ``box`` (x, y, width, height in CSS px, scale 1) are not grey: the
    plots' marks are coloured, text and axes are black or grey."""
    width, height, rows = png_pixels(data)
    bpp = len(rows[0]) // width
    count = 0
    for y in range(int(box["y"]), min(int(box["y"] + box["height"]), height)):
        row = rows[y]
        for x in range(int(box["x"]), min(int(box["x"] + box["width"]), width)):
            r, g, b = row[x * bpp:x * bpp + 3]
            count += max(r, g, b) - min(r, g, b) > 40
    return count
