"""The management web page in headless Chromium (Debian's ``chromium`` package), driven over
the Chrome DevTools Protocol with aiohttp's websocket client: log in, see a queue the test
declared with its depth, publish from the form, see the depth change, purge.

Skips with a reason where Chromium is not installed (``apt-get install chromium``; .ci/run
installs it). ``SPARK_AMQP_SCREENSHOT=path.png`` saves the page as the README shows it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pika
import pytest

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"),
                             shutil.which("google-chrome")) if p), None)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed: "
                                "`apt-get install -y chromium` (Debian's package; .ci/run installs it)")


class Page:
    """One Chromium tab over CDP: ``evaluate(js)`` and ``wait(js)`` (until truthy)."""

    def __init__(self, ws):
        self.ws = ws
        self.ids = itertools.count(1)

    async def send(self, method: str, **params):
        i = next(self.ids)
        await self.ws.send_str(json.dumps({"id": i, "method": method, "params": params}))
        while True:
            msg = json.loads((await self.ws.receive(timeout=60)).data)
            if msg.get("id") == i:
                if "error" in msg:
                    raise AssertionError(f"CDP {method}: {msg['error']}")
                return msg.get("result", {})

    async def evaluate(self, js: str):
        r = await self.send("Runtime.evaluate", expression=js, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise AssertionError(f"page script failed: {js}: {r['exceptionDetails']}")
        return r["result"].get("value")

    async def wait(self, js: str, what: str, timeout: float = 30.0):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = await self.evaluate(js)
            if last:
                return last
            await asyncio.sleep(0.2)
        text = await self.evaluate("document.body.innerText")
        raise AssertionError(f"{what}: not seen within {timeout}s (last {last!r}); page text:\n{text[:2000]}")


@contextlib.asynccontextmanager
async def _logged_in_page(url: str, profile: Path):
    """A headless Chromium tab on the page at ``url``, logged in as guest."""
    import aiohttp

    proc = subprocess.Popen([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                             "--disable-dev-shm-usage", "--remote-debugging-port=0", f"--user-data-dir={profile}",
                             "--window-size=1280,860", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert port_file.exists(), "Chromium did not open its DevTools port within 60 s"
        port = int(port_file.read_text().split()[0])
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/json/list") as r:
                targets = await r.json()
            ws_url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
            async with http.ws_connect(ws_url, max_msg_size=0) as ws:
                page = Page(ws)
                await page.send("Page.enable")
                await page.send("Page.navigate", url=url)
                await page.wait("document.readyState === 'complete' && !!document.querySelector('#login-form')",
                                "the page loaded")
                await page.wait("!document.querySelector('#login').hidden", "the login form")
                await page.evaluate("document.querySelector('#login-user').value = 'guest';"
                                    "document.querySelector('#login-password').value = 'guest';"
                                    "document.querySelector('#login-button').click(); true")
                yield page
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(15)


async def _drive(url: str, queue: str, profile: Path, screenshot: str | None) -> None:
    async with _logged_in_page(url, profile) as page:
        # the release the broker behaves like (mgmt_broker: RabbitMQ 3.10 mode)
        await page.wait("document.querySelector('#version').textContent.includes("
                        "'behaves like RabbitMQ 3.10.8')", "the version line")
        row = f"document.querySelector('#queues tr[data-queue={json.dumps(queue)}]')"
        await page.wait(f"{row} && {row}.querySelector('td.ready').textContent === '2'",
                        "the declared queue with 2 ready messages")
        assert await page.evaluate(f"{row}.querySelector('td.consumers').textContent") == "0"
        # publish one more from the form
        await page.evaluate(
            "document.querySelector('#publish-exchange').value = 'amq.default';"
            f"document.querySelector('#publish-routing-key').value = {json.dumps(queue)};"
            "document.querySelector('#publish-payload').value = 'from the browser';"
            "document.querySelector('#publish-button').click(); true")
        await page.wait("document.querySelector('#publish-result').textContent === 'published (routed)'",
                        "the publish result")
        await page.wait(f"{row}.querySelector('td.ready').textContent === '3'", "the depth going to 3")
        if screenshot:
            await asyncio.sleep(0.5)
            shot = await page.send("Page.captureScreenshot", format="png")
            import base64
            Path(screenshot).write_bytes(base64.b64decode(shot["data"]))
        # purge: two clicks (the first arms the button)
        await page.evaluate(f"{row}.querySelector('button.purge').click(); true")
        await page.wait(f"{row}.querySelector('button.purge').classList.contains('armed')", "the armed button")
        await page.evaluate(f"{row}.querySelector('button.purge').click(); true")
        await page.wait(f"{row} && {row}.querySelector('td.ready').textContent === '0'", "the purged queue")


def test_web_page_in_chromium(mgmt_broker, unique, tmp_path):
    q = unique("page")
    conn = pika.BlockingConnection(pika.URLParameters(mgmt_broker.url))
    try:
        ch = conn.channel()
        ch.queue_declare(q)
        ch.queue_bind(q, "amq.topic", "orders.#")
        ch.basic_publish("", q, b"one")
        ch.basic_publish("amq.topic", "orders.new", b"two")
        asyncio.run(_drive(mgmt_broker.management_url, q, tmp_path / "profile", os.environ.get("SPARK_AMQP_SCREENSHOT")))
        assert ch.queue_declare(q, passive=True).method.message_count == 0
        ch.queue_delete(q)
    finally:
        conn.close()


def test_stream_lists_in_chromium(tmp_path):
    """The page lists stream-protocol connections, publishers and consumers
    (/api/stream/*, as RabbitMQ's rabbitmq_stream_management)."""
    import sys
    sys.path.insert(0, str(Path(__file__).parent.parent / "broker"))
    from spark_amqp import EmbeddedBroker
    from spark_amqp.protocol import stream as S
    from stream_raw import RawStream, amqp10_data

    async def check(url: str) -> None:
        async with _logged_in_page(url, tmp_path / "profile") as page:
            await page.wait("[...document.querySelectorAll('#stream-publishers td')].some((t) => "
                            "t.textContent === 'page-producer')", "the stream publisher")
            await page.wait("[...document.querySelectorAll('#stream-consumers td')].some((t) => "
                            "t.textContent === 'page-stream')", "the stream consumer")
            assert await page.evaluate("document.querySelectorAll('#stream-connections tbody tr').length") == 1

    with EmbeddedBroker(stream_port=0, management=True) as b, RawStream(b.stream_port) as c:
        c.handshake()
        assert c.rpc(S.CreateStream(0, "page-stream", {})).code == S.Code.OK
        assert c.rpc(S.DeclarePublisher(0, 1, "page-producer", "page-stream")).code == S.Code.OK
        c.send(S.Publish(1, [1], [amqp10_data(b"x")]))
        c.wait_for(S.PublishConfirm)
        assert c.rpc(S.Subscribe(0, 3, "page-stream", S.OffsetSpec(S.OffsetType.FIRST), 5)).code == S.Code.OK
        asyncio.run(check(b.management_url))


def test_the_page_names_the_release_of_the_default_mode(tmp_path):
    """In the default mode (RabbitMQ 4.3) the page says so; it said "RabbitMQ 3.10.8" in
    both modes (the 3.10 mode: test_web_page_in_chromium)."""
    from spark_amqp import EmbeddedBroker

    async def drive(url: str) -> str:
        async with _logged_in_page(url, tmp_path / "profile") as page:
            return await page.wait("(t => t.includes('RabbitMQ') && t)(document.querySelector("
                                   "'#version').textContent)", "the version line")

    with EmbeddedBroker(management=True) as b:
        text = asyncio.run(drive(b.management_url))
    assert "behaves like RabbitMQ 4.3.5" in text and "3.10" not in text, text
