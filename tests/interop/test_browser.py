"""What a person sees of MCP Apps through loom, in headless Chromium (Debian's): a host page
built on the official ext-apps AppBridge (tests/browser/host.js, bundled with esbuild) renders a
view in a sandboxed iframe and forwards the view's tool calls to an official Python client —
connected to loom, or straight to the server to compare (SPEC §8.5, §12.1).

1. server-cohort-heatmap's view renders through loom as it does directly: the same heatmap
   (the view asks its server for data by the tool's own name; loom routes it).
2. loom's own view shows an envelope's dataset: rows, sorting, a second page through
   loom_query, statistics and a chart; hostile input gets clear errors.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import MCPError
from playwright.async_api import Frame, Page, async_playwright

from conftest import REPO_ROOT, connect
from dataplane_clients import CRM, FIXTURE_BIN, DataSetup
from test_apps import COHORT, apps  # noqa: F401 - fixture
from test_http_serve import connect_http, serve_http
from test_protocol_2026 import TOKENS, through_loom

pytestmark = pytest.mark.anyio

CHROMIUM = Path(os.environ.get("LOOM_CHROMIUM") or "/usr/bin/chromium")
BROWSER_MODULES = REPO_ROOT / ".ci" / "browser" / "node_modules"
HOST_JS = REPO_ROOT / "tests" / "browser" / "host.js"
# As this machine's notes say: without the background-networking flags Chromium keeps trying
# hosts a closed network refuses.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 20_000


@pytest.fixture(scope="module")
def host_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    if not CHROMIUM.is_file() or not (BROWSER_MODULES / ".bin" / "esbuild").is_file():
        pytest.fail(f"{CHROMIUM} or {BROWSER_MODULES} is missing: run .ci/setup-interop")
    out = tmp_path_factory.mktemp("host") / "host.bundle.js"
    subprocess.run(
        [str(BROWSER_MODULES / ".bin" / "esbuild"), str(HOST_JS), "--bundle", "--format=iife", f"--outfile={out}", "--log-level=warning"],
        check=True,
        env={**os.environ, "NODE_PATH": str(BROWSER_MODULES)},
    )
    return f"<!doctype html><html><body><script>{out.read_text()}</script></body></html>"


@pytest.fixture
def views(apps: DataSetup) -> DataSetup:
    """The cohort heatmap and the fixture (`crm`, whose large `rows` become envelopes)."""
    apps.servers[CRM] = {"command": str(FIXTURE_BIN), "args": ["--name", CRM], "env": {}}
    apps.enabled = [COHORT, CRM]
    return apps


@asynccontextmanager
async def browser_page(host_page: str, client: Any) -> AsyncIterator[Page]:
    """A fresh Chromium page holding the host, whose views' tool calls go to `client`."""
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1000, "height": 950})
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))

            async def call_tool(params: dict[str, Any]) -> dict[str, Any]:
                try:
                    result = await client.call_tool(params["name"], params.get("arguments") or {})
                except MCPError as error:
                    return {"content": [{"type": "text", "text": str(error)}], "isError": True}
                return result.model_dump(by_alias=True, exclude_none=True, mode="json")

            await page.expose_function("hostCallTool", call_tool)
            await page.set_content(host_page)
            yield page
            assert not errors, errors
        finally:
            await browser.close()


async def show(page: Page, html: str, arguments: dict[str, Any], result: Any, theme: str = "light") -> Frame:
    """Render the view `html` with a tool's input and result, as a host does; its frame."""
    payload = {"html": html, "input": arguments, "result": result.model_dump(by_alias=True, exclude_none=True, mode="json"), "theme": theme}
    assert await page.evaluate("(p) => window.showApp(p)", payload) == "shown"
    frame = page.frames[-1]
    assert frame != page.main_frame
    return frame


async def page_html(client: Any, uri: str) -> str:
    contents = (await client.read_resource(uri)).contents
    assert contents[0].mime_type == "text/html;profile=mcp-app", contents[0]
    return contents[0].text


async def heatmap_seen(host_page: str, client: Any, prefix: str) -> dict[str, Any]:
    """The cohort heatmap as a person sees it: the text of its cells and the picture."""
    html = await page_html(client, "ui://get-cohort-data/mcp-app.html")
    arguments = {"cohortCount": 12, "maxPeriods": 12}
    result = await client.call_tool(f"{prefix}get-cohort-data", arguments)
    async with browser_page(host_page, client) as page:
        frame = await show(page, html, arguments, result)
        # The view asks its server for data itself (by the tool's own name) and draws a grid.
        await frame.wait_for_function("document.querySelectorAll('[class*=heatmapGrid] *').length > 100", timeout=WAIT_MS)
        await page.wait_for_timeout(300)
        return {
            "text": await frame.evaluate("document.body.innerText"),
            "cells": await frame.evaluate("document.querySelectorAll('[class*=heatmapGrid] *').length"),
            "picture": await page.screenshot(),
        }


async def test_the_cohort_heatmap_renders_through_loom_as_it_does_directly(views, host_page):
    async with connect(views.direct(COHORT), mode="auto", loom_like=True, quick_stop=True) as direct:
        own = await heatmap_seen(host_page, direct, "")
    async with through_loom(views, "stdio", "auto") as client:
        via = await heatmap_seen(host_page, client, f"{COHORT}_")
    assert via["cells"] == own["cells"], (via["cells"], own["cells"])
    assert via["text"] == own["text"], (via["text"][:500], own["text"][:500])
    assert "Jan" in own["text"] or "Feb" in own["text"] or "%" in own["text"], own["text"][:300]
    assert via["picture"] == own["picture"], "the heatmap looks different through loom"


async def rows_shown(frame: Frame) -> list[list[str]]:
    return await frame.evaluate(
        "[...document.querySelectorAll('#rows tbody tr')].map(tr => [...tr.cells].map(td => td.textContent))"
    )


async def header_names(frame: Frame) -> list[str]:
    return await frame.evaluate("[...document.querySelectorAll('#rows thead th')].map(th => th.textContent)")


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_loom_s_view_shows_an_envelope_s_dataset(views, host_page, transport, tmp_path):
    async with through_loom(views, transport, "auto") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert (tools["loom_query"].meta or {})["ui"]["resourceUri"] == "ui://loom/dataset.html"
        html = await page_html(client, "ui://loom/dataset.html")
        result = await client.call_tool(f"{CRM}_rows", {"count": 300})
        envelope = result.structured_content
        assert envelope["kind"] == "loom_dataset_ref", envelope
        assert (result.meta or {})["ui"]["resourceUri"] == "ui://loom/dataset.html", result.meta
        async with browser_page(host_page, client) as page:
            frame = await show(page, html, {"count": 300}, result, theme="dark")
            await frame.wait_for_function("document.querySelectorAll('#rows tbody tr').length > 0", timeout=WAIT_MS)
            names = await header_names(frame)
            assert names[:3] == ["id", "name", "email"], names
            first = await rows_shown(frame)
            assert [row[0] for row in first] == [str(i) for i in range(len(first))], first
            assert await frame.text_content("#page") == f"1–{len(first)} of 300"
            assert await frame.evaluate("document.documentElement.dataset.theme") == "dark"

            # Sorting: score descending (a second click), the largest first.
            score = frame.locator("#rows thead th", has_text="score")
            await score.click()
            await frame.wait_for_function("document.querySelector('#rows thead th[aria-sort=ascending]') !== null", timeout=WAIT_MS)
            await score.click()
            await frame.wait_for_function("document.querySelector('#rows thead th[aria-sort=descending]') !== null", timeout=WAIT_MS)
            await frame.wait_for_function("document.querySelector('#rows tbody tr td').textContent === '299'", timeout=WAIT_MS)
            top = await rows_shown(frame)
            assert [row[0] for row in top[:3]] == ["299", "298", "297"], top[:3]

            # The second page comes from loom_query.
            await frame.click("#next")
            size = len(top)
            await frame.wait_for_function(f"document.querySelector('#rows tbody tr td').textContent === '{299 - size}'", timeout=WAIT_MS)
            assert await frame.text_content("#page") == f"{size + 1}–{2 * size} of 300"

            # Filtering (the filter travels as an SQL literal; a quote in it is text, not SQL).
            await frame.fill("#filter", "user-12'")
            await frame.wait_for_function("document.querySelector('#page').textContent === 'no rows'", timeout=WAIT_MS)
            await frame.fill("#filter", "user-12")
            await frame.wait_for_function("document.querySelector('#page').textContent.endsWith('of 11')", timeout=WAIT_MS)

            # Statistics and the chart.
            stats = await frame.evaluate("[...document.querySelectorAll('#columns tbody tr')].map(tr => tr.cells[0].textContent)")
            assert stats[:2] == ["id", "name"], stats
            await frame.wait_for_function("document.querySelectorAll('#bars rect').length > 0", timeout=WAIT_MS)
            bars = await frame.evaluate("document.querySelectorAll('#bars rect').length")
            assert 1 <= bars <= 12, bars
            # A sum of a measure (not of the key) by a text category with few values.
            chosen = await frame.evaluate("[document.querySelector('#measure').value, document.querySelector('#category').value]")
            assert chosen == ["score", "plan"], chosen
            labels = await frame.evaluate("[...document.querySelectorAll('#bars text')].map(t => t.textContent)")
            assert sorted(labels[0::2]) == ["free", "pro", "team"], labels
            assert not await frame.is_visible("#error")
            (tmp_path / "view.png").write_bytes(await page.screenshot())


async def test_loom_s_view_refuses_what_is_not_this_session_s(views, host_page):
    with serve_http(views) as loom:
        async with (
            connect_http(loom.url, "auto", headers={"Authorization": f"Bearer {TOKENS['alice']}"}) as alice,
            connect_http(loom.url, "auto", headers={"Authorization": f"Bearer {TOKENS['bob']}"}) as bob,
        ):
            await refusals(host_page, alice, bob)


async def refusals(host_page: str, alice: Any, bob: Any) -> None:
    """Another credential's ref, a huge filter and a page nobody serves, each refused clearly."""
    await bob.call_tool(f"{CRM}_rows", {"count": 300})
    theirs = (await bob.call_tool(f"{CRM}_rows", {"count": 400})).structured_content["ref"]
    html = await page_html(alice, "ui://loom/dataset.html")
    mine = await alice.call_tool(f"{CRM}_rows", {"count": 300})
    assert mine.structured_content["ref"] != theirs
    # A result naming another session's ref: the view says loom does not know it.
    forged = mine.model_copy(update={"structured_content": {**mine.structured_content, "ref": theirs}})
    async with browser_page(host_page, alice) as page:
        frame = await show(page, html, {}, forged)
        await frame.wait_for_selector("#error", state="visible", timeout=WAIT_MS)
        error = await frame.text_content("#error")
        assert "loom_describe" in error and theirs in error, error
        assert await rows_shown(frame) == []
    # A huge filter: the page keeps 200 characters of it, and the answer is "no rows".
    async with browser_page(host_page, alice) as page:
        frame = await show(page, html, {}, mine)
        await frame.wait_for_function("document.querySelectorAll('#rows tbody tr').length > 0", timeout=WAIT_MS)
        await frame.fill("#filter", "x" * 100_000)
        await frame.wait_for_function("document.querySelector('#page').textContent === 'no rows'", timeout=WAIT_MS)
        assert len(await frame.input_value("#filter")) == 200
    # A ui:// page that is neither loom's nor any server's.
    with pytest.raises(MCPError) as refused:
        await alice.read_resource("ui://nobody/view.html")
    assert "no server lists the resource" in str(refused.value)


async def test_loom_s_view_filters_a_wide_dataset(views, host_page):
    """A wide dataset: a page shows its first 40 columns, and a filter over its columns stays one
    small statement (the filter written once), so a long filter answers instead of passing
    loom's 64 KiB statement limit (one test per column would be ~75 KB here)."""
    async with through_loom(views, "stdio", "auto") as client:
        envelope = (await client.call_tool(f"{CRM}_rows", {"count": 300})).structured_content
        columns = ", ".join(f"id AS c{i}" for i in range(300))
        made = await client.call_tool(
            "loom_materialize", {"sql": f"SELECT id, {columns} FROM {envelope['ref']}", "name": "wide"}
        )
        assert not made.is_error, made.content
        described = await client.call_tool("loom_describe", {"ref": "ds_view_wide"})
        html = await page_html(client, "ui://loom/dataset.html")
        async with browser_page(host_page, client) as page:
            frame = await show(page, html, {"ref": "ds_view_wide"}, described)
            await frame.wait_for_function("document.querySelectorAll('#rows tbody tr').length > 0", timeout=WAIT_MS)
            # A page shows the first 40 columns (a row of 301 would not be answered inline).
            assert len(await header_names(frame)) == 40
            assert "301 columns (the first 40 shown)" in await frame.text_content("#summary")
            await frame.fill("#filter", "299" + "9" * 197)
            await frame.wait_for_function("document.querySelector('#page').textContent === 'no rows'", timeout=WAIT_MS)
            await frame.fill("#filter", "299")
            await frame.wait_for_function("document.querySelector('#page').textContent.endsWith('of 1')", timeout=WAIT_MS)
            assert not await frame.is_visible("#error"), await frame.text_content("#error")
