"""The context firewall (SPEC §19) through the official clients, each in every mode it has: the
Python SDK 2.x (`auto`, the pinned `2026-07-28`, `legacy`), the Python SDK 1.x
(dataplane_clients.py), and the Inspector CLI (one process, hence one loom session, per call).

A large result that is not a table comes back reduced, under a `[loom: …]` header line, with its
original kept whole as a document `doc_<n>` (read with `loom_read`, queried with `loom_query`)
and base64 lifted out as blobs `blob_<n>` (read back as image or resource blocks); an isError
result is never shortened below 50,000 characters; loom_read's own errors are isError results.
Every client must accept every one of these results as it is: a client that raises fails the test.

Most results come from the fixture's `raw` tool, which answers with exactly the JSON it is given,
so the test knows the original to the byte.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest

from conftest import FS, PY, REPO_ROOT
from dataplane_clients import (
    CLIENTS,
    CRM,
    DataClient,
    DataSetup,
    assert_error,
    assert_ok,
    dp,  # noqa: F401 - fixture
    open_client,
    text_of,
)

pytestmark = pytest.mark.anyio

# The default budget (maxOutputTokens 2,000 × 3.5 characters, SPEC §19.3.4); the header line comes
# on top of it.
BUDGET_CHARS = 7_000
# An isError result is passed whole up to this many characters (SPEC §19.2).
ERROR_HARD_LIMIT = 50_000
# loom_read's largest page (SPEC §19.4).
MAX_PAGE = 100_000

NPM_REACT = REPO_ROOT / "testdata" / "json" / "npm_react.json"

ERROR_LINE = "2026-12-01T00:00:03Z ERROR db: connection refused (first failure)"
SUMMARY_LINE = "SUMMARY: 9999 requests, 1 error, exit code 1"


@pytest.fixture(params=CLIENTS)
def client_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def fw(dp: DataSetup) -> DataSetup:
    """Only the fixture server: the results here are all made with its `raw` tool."""
    return dp.use(CRM)


def a_log(lines: int = 10_000) -> str:
    """The log of tests/integration/firewall.rs: INFO lines, one ERROR on line 3, a SUMMARY line last
    (`lines` + 1 lines, no final newline)."""
    out = [
        ERROR_LINE if n == 3 else f"2026-12-01T00:{n // 60 % 60:02d}:{n % 60:02d}Z INFO request {n} served in {n % 17} ms"
        for n in range(1, lines + 1)
    ]
    return "\n".join([*out, SUMMARY_LINE])


def text_result(text: str, *, is_error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if is_error:
        result["isError"] = True
    return result


async def raw(client: DataClient, result: dict[str, Any]) -> dict[str, Any]:
    """The fixture answers with exactly `result`; what the client got back."""
    return await client.call(f"{CRM}_raw", {"json": json.dumps(result)})


def only_text(result: dict[str, Any], what: str) -> str:
    """The one text block of a successful result."""
    assert not result.get("isError"), f"{what}: {text_of(result)[:500]}"
    blocks = result["content"]
    assert [b["type"] for b in blocks] == ["text"], f"{what}: {[b['type'] for b in blocks]}"
    return blocks[0]["text"]


def original_ref(text: str) -> str:
    """The document a header line names as the full original."""
    found = re.search(r'full original: loom_read\("(doc_\d+)"\)', text.split("\n", 1)[0])
    assert found, f"no full-original ref in the header: {text[:300]}"
    return found[1]


async def read(client: DataClient, ref: str, **arguments: Any) -> dict[str, Any]:
    """A successful loom_read: content [the text, where it sits], plus structuredContent."""
    result = await client.call("loom_read", {"ref": ref, **arguments})
    assert not result.get("isError"), f"loom_read {ref} {arguments}: {text_of(result)[:500]}"
    assert [b["type"] for b in result["content"]] == ["text", "text"], result["content"]
    assert isinstance(result.get("structuredContent"), dict), f"loom_read {arguments}: no structuredContent"
    return result


async def read_all(client: DataClient, ref: str, length: int = MAX_PAGE) -> str:
    """Every page of `ref`, concatenated, checking each page's structuredContent and the block
    that says where the page sits."""
    pages: list[str] = []
    offset = 0
    while True:
        result = await read(client, ref, offset=offset, length=length)
        page, where = (block["text"] for block in result["content"])
        position = result["structuredContent"]
        assert position["ref"] == ref and position["offset"] == offset, position
        assert position["length"] == len(page), position  # code points: Python's len
        total = position["total"]
        assert f"{ref} characters {offset:,}–{offset + len(page):,} of {total:,}" in where, where
        pages.append(page)
        if offset + len(page) < total:
            assert position["nextOffset"] == offset + len(page), position
            assert f'next: loom_read("{ref}", offset: {position["nextOffset"]}' in where, where
            offset = position["nextOffset"]
        else:
            # The last page: no nextOffset, and the block says so.
            assert "nextOffset" not in position, position
            assert where.endswith("the end]"), where
            return "".join(pages)


async def query(client: DataClient, sql: str) -> list[dict[str, Any]]:
    answer = assert_ok(await client.call("loom_query", {"sql": sql}), f"loom_query {sql}")
    assert "rows" in answer, f"loom_query {sql}: not an inline answer: {answer}"
    return answer["rows"]


async def test_a_large_log_is_reduced_and_the_original_reads_back_whole(fw, client_kind):
    log = a_log()
    async with open_client(client_kind, fw) as client:
        result = await raw(client, text_result(log))
        shown = only_text(result, "a 10,000-line log")
        header, _, body = shown.partition("\n")
        assert header.startswith(f"[loom: text reduced {len(log):,} → "), header
        assert "(head and tail kept)" in header, header
        # No envelope and no structuredContent: the fixture sent none (SPEC §19.5).
        assert "structuredContent" not in result, result["structuredContent"]
        assert len(body) <= BUDGET_CHARS and len(header) < 200, (len(header), len(body))
        assert ERROR_LINE in body.split("\n")[:10], "the first error (line 3) is in the head"
        assert body.endswith("\n" + SUMMARY_LINE), "the summary line is the tail's last line"
        ref = original_ref(shown)

        # The whole original, page by page, exactly.
        assert await read_all(client, ref) == log

        # By line numbers: a range, one line, and an open end clamped to the last line.
        lines = log.split("\n")
        ranged = await read(client, ref, lines="2-4")
        assert ranged["content"][0]["text"] == "\n".join(lines[1:4])
        start = len("\n".join(lines[:1])) + 1
        assert ranged["structuredContent"] == {
            "ref": ref,
            "firstLine": 2,
            "lastLine": 4,
            "totalLines": 10_001,
            "offset": start,
            "length": len("\n".join(lines[1:4])),
            "total": len(log),
        }
        assert f"{ref} lines 2–4 of 10,001" in ranged["content"][1]["text"]
        single = await read(client, ref, lines="3")
        assert single["content"][0]["text"] == ERROR_LINE
        tail = await read(client, ref, lines="9999-")
        assert tail["content"][0]["text"] == "\n".join(lines[9998:])
        assert (tail["structuredContent"]["firstLine"], tail["structuredContent"]["lastLine"]) == (9999, 10_001)

        # By pattern: the matching line numbers, all counted.
        found = await read(client, ref, pattern="ERROR|SUMMARY", context=0)
        assert found["structuredContent"] == {"ref": ref, "pattern": "ERROR|SUMMARY", "matches": 2, "lines": [3, 10_001]}
        assert found["content"][0]["text"].split("\n")[:3] == [f"3: {ERROR_LINE}", "--", f"10001: {SUMMARY_LINE}"]
        many = await read(client, ref, pattern=r"(?i)request 1\d{3} served")
        assert many["structuredContent"]["matches"] == 1000, "all counted, at most 100 shown"
        assert len(many["structuredContent"]["lines"]) <= 100

        # As a table doc_<n>(line_no, text).
        rows = await query(client, f"SELECT count(*) AS n, max(line_no) AS at FROM {ref} WHERE text LIKE '%ERROR%'")
        assert rows == [{"n": 1, "at": 3}]
        listed = assert_ok(await client.call("loom_list_datasets", {}), "loom_list_datasets")
        entry = next(d for d in listed["datasets"] if d["ref"] == ref)
        assert (entry["kind"], entry["documentKind"], entry["chars"], entry["lines"]) == ("document", "text", len(log), 10_001)


async def test_the_cut_markers_call_runs_as_written(fw):
    """The marker line of a budget cut says how to read what was left out (SPEC §19.3.4); a model
    that makes that call as written must get the text (the envelope's `usage` runs as written,
    test_dataplane.py). One client suffices: the call is loom's text, not the client's."""
    log = a_log()
    async with open_client("sdk2-legacy", fw) as client:
        shown = only_text(await raw(client, text_result(log)), "a 10,000-line log")
        marker = re.search(r'loom_read\("(doc_\d+)", offset: (\d+), length: (\d+)\)', shown.split("\n", 1)[1])
        assert marker, shown
        ref, offset, length = marker[1], int(marker[2]), int(marker[3])
        result = await client.call("loom_read", {"ref": ref, "offset": offset, "length": length})
        assert not result.get("isError"), f"the marker's own call fails: {text_of(result)}"
        assert result["content"][0]["text"] == log[offset : offset + length]


def png_bytes(size: int) -> bytes:
    """`size` bytes that start with the PNG signature (sniffed as image/png)."""
    signature = b"\x89PNG\r\n\x1a\n"
    return signature + bytes((i * 7 + 3) % 256 for i in range(size - len(signature)))


async def test_base64_is_lifted_out_and_reads_back_as_image_and_resource(fw, client_kind):
    """A PNG data URI in Markdown markup and a PDF data URI in running text: both lifted out as
    blobs; loom_read answers the PNG as an image block and the PDF as an embedded resource, and the
    client parses them as its own image and blob-resource types."""
    png = base64.b64encode(png_bytes(6_000)).decode()
    pdf = base64.b64encode(b"%PDF-1.7\n" + bytes(range(256)) * 12).decode()
    prose = "\n".join(f"Step {i}: the page rendered as expected, see the screenshot below." for i in range(20))
    text = f"# Visual check\n\n{prose}\n\n![screenshot](data:image/png;base64,{png})\n\nReport: data:application/pdf;base64,{pdf} (attached)\n"
    async with open_client(client_kind, fw) as client:
        shown = only_text(await raw(client, text_result(text)), "a text with two data URIs")
        header, _, body = shown.partition("\n")
        assert header.startswith("[loom: text reduced"), header
        assert "2 base64 blobs" in header, header
        assert png not in shown and pdf not in shown
        # Inside markup the placeholder keeps the syntax (SPEC §19.3.1); in running text it says
        # how to read the blob.
        image_ref = re.search(r"!\[screenshot\]\(loom:(blob_\d+);type=image/png;bytes=6000\)", body)
        assert image_ref, body
        pdf_ref = re.search(r"\[loom: application/pdf, [\d,]+ bytes of base64 lifted out → loom_read\((blob_\d+)\)\]", body)
        assert pdf_ref, body
        assert body.startswith(f"# Visual check\n\n{prose}\n")

        image = await client.call("loom_read", {"ref": image_ref[1]})
        assert not image.get("isError"), text_of(image)
        assert image["content"] == [{"type": "image", "data": png, "mimeType": "image/png"}]
        assert client.content_types == ["ImageContent"], client.content_types

        resource = await client.call("loom_read", {"ref": pdf_ref[1]})
        assert not resource.get("isError"), text_of(resource)
        [block] = resource["content"]
        assert block["type"] == "resource", block
        assert block["resource"] == {"uri": f"loom://blob/{pdf_ref[1]}", "mimeType": "application/pdf", "blob": pdf}
        assert client.content_types == ["EmbeddedResource/BlobResourceContents"], client.content_types

        # The original still has the data URIs, exactly.
        assert await read_all(client, original_ref(shown)) == text

        # Blocks that are not text stay where they were, untouched, around a reduced text block
        # (SPEC §19.1); the client still parses the image as an image.
        small_png = base64.b64encode(png_bytes(300)).decode()
        image_block = {"type": "image", "data": small_png, "mimeType": "image/png"}
        mixed = await raw(client, {"content": [{"type": "text", "text": a_log(3_000)}, image_block, {"type": "text", "text": "done"}]})
        assert not mixed.get("isError"), text_of(mixed)
        first, second, third = mixed["content"]
        assert first["type"] == "text" and first["text"].startswith("[loom: text reduced"), first
        assert (second, third) == (image_block, {"type": "text", "text": "done"})
        assert client.content_types == ["TextContent", "ImageContent", "TextContent"], client.content_types


async def test_a_json_document_is_summarised_and_its_folds_are_datasets(fw, client_kind):
    """npm's registry document for react (335 KB): a header line, then a valid-JSON summary whose
    `versions` fold names a dataset of every version."""
    document = NPM_REACT.read_text()
    versions = json.loads(document)["versions"]
    async with open_client(client_kind, fw) as client:
        shown = only_text(await raw(client, text_result(document)), "npm_react.json")
        header, _, body = shown.partition("\n")
        assert header.startswith(f"[loom: json reduced {len(document):,} → "), header
        assert "JSON summarised by structure" in header, header
        summary = json.loads(body)
        assert summary["name"] == "react"
        fold = summary["versions"][-1]["…"]
        assert summary["versions"][:-1] == versions[: len(summary["versions"]) - 1]
        found = re.search(r"\((\S+) in all\) at \$\.versions in (doc_\d+); dataset (ds_\w+) for loom_query", fold)
        assert found, fold
        assert found[1] == f"{len(versions):,}" and found[2] == original_ref(shown)
        dataset = found[3]
        rows = await query(client, f"SELECT count(*) AS n, count(DISTINCT value) AS d FROM {dataset}")
        assert rows == [{"n": len(versions), "d": len(set(versions))}]
        # A dataset is not a document: loom_read says where to go instead.
        assert_error(await client.call("loom_read", {"ref": dataset}), "loom_read of a dataset", "loom_read: ", "loom_query")
        assert await read_all(client, found[2]) == document


async def test_error_results_arrive_whole(fw, client_kind):
    """An isError result under 50,000 characters is never reduced (SPEC §19.2), however far over the
    budget; loom_read's own errors are isError results the client takes as results."""
    trace = "Traceback (most recent call last):\n" + '  File "worker.py", line 12, in run\n' * 600 + "RuntimeError: the job failed"
    assert 20_000 < len(trace) < ERROR_HARD_LIMIT
    async with open_client(client_kind, fw) as client:
        failed = await raw(client, text_result(trace, is_error=True))
        assert failed.get("isError") is True
        assert [b["type"] for b in failed["content"]] == ["text"]
        assert failed["content"][0]["text"] == trace

        # Over the hard limit: cut under a header that says so, and still an error.
        huge = trace * 3
        cut = await raw(client, text_result(huge, is_error=True))
        assert cut.get("isError") is True
        header, _, body = text_of(cut).partition("\n")
        assert header.startswith(f"[loom: security-relevant output cut at the hard limit, {len(huge):,} → 50,000 chars"), header
        assert len(body) <= ERROR_HARD_LIMIT + 200 and body.startswith("Traceback") and body.endswith("the job failed")
        assert await read_all(client, original_ref(text_of(cut))) == huge

        # A permission problem in a successful result is security-relevant too: whole.
        denied = "Error: EACCES: permission denied, open '/srv/app/secrets.yaml'\n" + "  at open (node:fs:573:3)\n" * 800
        kept = await raw(client, text_result(denied))
        assert not kept.get("isError") and only_text(kept, "a permission denial") == denied

        # loom_read's own errors (SPEC §19.4): nothing held yet, then past the end of a document.
        none = assert_error(await client.call("loom_read", {"ref": "doc_9"}), "unknown doc", "no document or blob `doc_9`")
        assert none.startswith("loom_read: "), none
        ref = original_ref(only_text(await raw(client, text_result(a_log(2_000))), "a log"))
        past = assert_error(await client.call("loom_read", {"ref": ref, "offset": 10**7}), "offset past the end", "past the end")
        assert past.startswith("loom_read: "), past
        for arguments, says in [
            ({"ref": "blob_4"}, "documents and blobs held: doc_1, doc_2"),
            ({"ref": ref, "length": 100_001}, "1–100000"),
            ({"ref": ref, "lines": "5000"}, "past the end"),
            ({"ref": ref, "lines": "b-a"}, "lines"),
            ({"ref": ref, "pattern": "(unclosed"}, "not a valid regular expression"),
            ({"ref": ref, "lines": "2", "pattern": "x"}, "not several"),
        ]:
            text = assert_error(await client.call("loom_read", arguments), f"loom_read {arguments}", says)
            assert text.startswith("loom_read: "), text
        # And the session goes on.
        assert (await read(client, ref, lines="3"))["content"][0]["text"] == ERROR_LINE


async def test_a_copy_in_structured_content_is_reduced_with_its_text(fw, client_kind):
    """Real servers send a large text twice: a Python SDK tool as text plus `{"result": text}`,
    server-filesystem's read_text_file as text plus `{"content": text}` (under an outputSchema,
    which loom lists under `_meta` since it may replace the result). The copy is reduced with its
    text block (SPEC §19.1), so the client does not get the whole text after all."""
    log_file = fw.fs_root / "build.log"
    log_file.write_text(a_log(5_000))
    fw.use(PY, FS)
    async with open_client(client_kind, fw) as client:
        built = await client.call(f"{PY}_build_log", {"lines": 8_000})
        shown = only_text(built, "build_log")
        assert shown.startswith("[loom: text reduced"), shown[:300]
        assert "ERROR compiler" in shown and shown.endswith("SUMMARY: 8000 steps, 1 error")
        assert built["structuredContent"] == {"result": shown}
        ref = original_ref(shown)
        found = await read(client, ref, pattern="ERROR|SUMMARY", context=0)
        assert found["structuredContent"]["lines"] == [3, 8_001]

        read_back = await client.call(f"{FS}_read_text_file", {"path": str(log_file)})
        shown = only_text(read_back, "read_text_file build.log")
        assert shown.startswith("[loom: text reduced"), shown[:300]
        assert ERROR_LINE in shown and shown.endswith(SUMMARY_LINE)
        assert read_back["structuredContent"] == {"content": shown}
        assert await read_all(client, original_ref(shown)) == log_file.read_text()


async def test_pages_count_code_points_and_keep_every_line_ending(fw, client_kind):
    """Pages are cut in code points (SPEC §19.4): emoji, ZWJ sequences, flags, combining marks and
    CJK (1-4 UTF-8 bytes, 1-2 UTF-16 units each) split across pages still concatenate exactly, and a
    CRLF line keeps its `\r` (in a lines read and in the document table)."""
    line = "naïve café — 日本語のログ 👩‍👩‍👧 🇯🇵 e\u0301 𝄞 {n}"
    text = "\r\n".join(line.format(n=n) for n in range(2_000))
    async with open_client(client_kind, fw) as client:
        shown = only_text(await raw(client, text_result(text)), "a multilingual CRLF text")
        assert shown.startswith(f"[loom: text reduced {len(text):,} → "), shown[:300]
        ref = original_ref(shown)
        # 9,999 is prime to the line length: pages start inside every kind of character.
        assert await read_all(client, ref, length=9_999) == text
        second = await read(client, ref, lines="2")
        assert second["content"][0]["text"] == line.format(n=1) + "\r"
        rows = await query(client, f"SELECT text FROM {ref} WHERE line_no = 2000")
        assert rows == [{"text": line.format(n=1999)}], "the last line has no line ending"
        rows = await query(client, f"SELECT count(*) AS n FROM {ref} WHERE text LIKE '%' || chr(13)")
        assert rows == [{"n": 1_999}]


async def test_compression_policy_bypass_and_budget(fw, client_kind):
    """SPEC §19.6: a bypassed tool's results pass whole and its outputSchema stays listed, so the
    client validates the whole result against it; a smaller perServer budget cuts harder."""
    (fw.fs_root / "build.log").write_text(a_log(3_000))
    fw.use(CRM, FS)
    fw.options["compression"] = {
        "perServer": {CRM: {"maxOutputTokens": 500}},
        "perTool": {f"{FS}/read_text_file": {"bypass": True}},
    }
    async with open_client(client_kind, fw) as client:
        tools = {tool["name"]: tool for tool in await client.list_tools()}
        schema = tools[f"{FS}_read_text_file"].get("outputSchema")
        assert schema is not None and "content" in schema["properties"], tools[f"{FS}_read_text_file"]
        # The client checks structuredContent against the listed outputSchema itself.
        whole = await client.call(f"{FS}_read_text_file", {"path": str(fw.fs_root / "build.log")})
        assert only_text(whole, "a bypassed read") == a_log(3_000)
        assert whole["structuredContent"] == {"content": a_log(3_000)}

        shown = only_text(await raw(client, text_result(a_log())), "a log under a 500-token budget")
        body = shown.partition("\n")[2]
        assert len(body) <= 1_750, len(body)
        assert ERROR_LINE in body and body.endswith(SUMMARY_LINE)


# --------------------------------------------------------------------------------------------
# The Inspector CLI: one process, hence one loom session, per call. Reduced results and a
# loom_read error are what one call can show; reading a document or blob back, or querying a
# fold's dataset, needs a second call in the same session, which the SDK tests above cover.


def _inspector(fw: DataSetup, era: str) -> Any:
    from test_dataplane_inspector import INSPECTOR_CLI, NODE22, Inspector

    for path in (NODE22, INSPECTOR_CLI):
        if not path.is_file():
            raise pytest.UsageError(f"{path} is missing: run .ci/setup-interop")
    return Inspector(fw, era)


@pytest.mark.parametrize("era", ["legacy", "auto", "modern"])
def test_inspector_reduced_result_and_loom_read_error(fw, era):
    inspector = _inspector(fw, era)
    # 1,500 lines: the arguments go on the Inspector's command line (at most 128 KiB per argument
    # on Linux).
    log = a_log(1_500)
    result = inspector.call(f"{CRM}_raw", {"json": json.dumps(text_result(log))})
    shown = only_text(result, "a 1,500-line log")
    assert shown.startswith(f"[loom: text reduced {len(log):,} → "), shown[:300]
    assert ERROR_LINE in shown and shown.endswith(SUMMARY_LINE)
    assert len(shown.partition("\n")[2]) <= BUDGET_CHARS
    assert original_ref(shown) == "doc_1"

    # A fresh session holds nothing: loom_read can only fail, as a result (exit 5, not a refusal).
    text = assert_error(inspector.call("loom_read", {"ref": "doc_1"}), "loom_read", "no document or blob `doc_1`")
    assert text.startswith("loom_read: "), text


@pytest.mark.parametrize("era", ["legacy", "auto", "modern"])
def test_inspector_json_summary_and_lifted_base64(fw, era):
    """npm_react.json is too large for a command line: it is read through server-filesystem
    (whose outputSchema loom lists under `_meta`, with its `{content}` copy reduced too)."""
    (fw.fs_root / "react.json").write_text(NPM_REACT.read_text())
    fw.use(CRM, FS)
    inspector = _inspector(fw, era)
    result = inspector.call(f"{FS}_read_text_file", {"path": str(fw.fs_root / "react.json")})
    shown = only_text(result, "react.json")
    header, _, body = shown.partition("\n")
    assert header.startswith("[loom: json reduced") and "JSON summarised by structure" in header, header
    assert "at $.versions in doc_1; dataset ds_fs_read_text_file_versions_1 for loom_query" in json.loads(body)["versions"][-1]["…"]
    assert result["structuredContent"] == {"content": shown}

    png = base64.b64encode(png_bytes(9_000)).decode()
    text = "Rendered page:\n" + "The layout matches the design. " * 40 + f"\n<img src=\"data:image/png;base64,{png}\">\n"
    shown = only_text(inspector.call(f"{CRM}_raw", {"json": json.dumps(text_result(text))}), "a data URI")
    assert "1 base64 blob (9,000 bytes) lifted out" in shown.partition("\n")[0], shown[:300]
    assert '<img src="loom:blob_1;type=image/png;bytes=9000">' in shown and png not in shown
