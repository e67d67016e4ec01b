#!/usr/bin/env python3
"""Writes the firewall corpus (SPEC §19): each case's text and its expected verdict, decided here
from how the text was made, never from loom's reading. Run from this directory; deterministic.

verdict: "reduced" or "passed"; stages: which stages must have run (binary, markdown, json, cut,
security); absent: stages that must not have run; keep: "head" or "head_and_tail" for a cut."""
import base64, json, random

rng = random.Random(20261201)
cases = {}

def case(name, text, **expect):
    cases[name] = (text, expect)

# A service log: the first error and the final summary both matter.
lines = []
for n in range(1, 8001):
    if n == 7:
        lines.append("2026-12-01T10:00:07Z ERROR payment: card declined for order 1007")
    else:
        lines.append(f"2026-12-01T10:{n // 60 % 60:02}:{n % 60:02}Z INFO handled request {n} in {n % 23} ms")
lines.append("SUMMARY: 8000 requests, 1 error")
case("app_log.txt", "\n".join(lines), verdict="reduced", stages=["cut"], absent=["binary", "json", "markdown"], keep="head_and_tail")

# Under the default budget (7,000 characters): left alone.
case("short_note.txt", ("A short note about the deployment window. " * 70).strip(), verdict="passed")

# A README: prose keeps its head.
sections = []
for s in range(1, 31):
    sections.append(f"## Section {s}\n\n" + " ".join(
        rng.choice(["The", "A", "This", "Each"]) + " " + rng.choice(["module", "option", "command", "service"]) + " " +
        rng.choice(["reads", "writes", "checks", "formats"]) + " " + rng.choice(["the config", "its input", "every file", "the cache"]) + "."
        for _ in range(40)))
case("readme.md", "# Project\n\nA tool that does things.\n\n" + "\n\n".join(sections), verdict="reduced", stages=["cut"], absent=["binary"], keep="head")

# A screenshot inline as a data URI, and a little text.
png = bytes([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) + bytes(rng.getrandbits(8) for _ in range(30000))
case("screenshot_data_uri.txt", "Captured the page.\n![page](data:image/png;base64," + base64.b64encode(png).decode() + ")\nDone.",
     verdict="reduced", stages=["binary"], absent=["cut"])

# Hash lists are not base64 payload, however long: only the budget cut applies.
hashes = []
for i in range(300):
    digest = bytes(rng.getrandbits(8) for _ in range(32))
    hashes.append(f"{digest.hex()}  file{i}.tar.gz")
    hashes.append(f"sha256-{base64.b64encode(digest).decode()}  file{i}.tar.gz")
case("checksums.txt", "\n".join(hashes), verdict="reduced", stages=["cut"], absent=["binary"], keep="head_and_tail")

# Minified JavaScript on one line: no base64 lifted, cut inside the line.
js = ";".join(f"function f{i}(a,b){{return a.map(x=>x*{i}+b).filter(Boolean)}}" for i in range(700))
case("minified.js.txt", js, verdict="reduced", stages=["cut"], absent=["binary"], keep="head_and_tail")

# A JSON document that is not a table: summarised by structure.
cases["npm_types_node.json"] = (None, dict(file="../json/npm_types_node.json", verdict="reduced", stages=["json"], absent=["cut", "binary"]))

# Real pages (Python's documentation) and a hand-written news layout: main content as Markdown;
# the long pages are then cut, keeping the head.
for page in ["py_glossary", "py_howto_logging", "py_tutorial_classes", "py_whatsnew_3_11"]:
    cases[page + ".html"] = (None, dict(file=f"../html/pages/{page}.html", verdict="reduced", stages=["markdown", "cut"], absent=["binary"], keep="head"))
cases["news_blog_layout.html"] = (None, dict(file="../html/pages/news_blog_layout.html", verdict="reduced", stages=["markdown"], absent=["cut", "binary"]))

# Security-relevant: passed whole under the hard limit.
case("permission_denied.txt", "Error: EACCES: permission denied, open '/etc/ssl/private/key.pem'\n" +
     "\n".join(f"    at step {i} (/app/node_modules/fs/index.js:{i}:7)" for i in range(600)), verdict="passed")

for name, (text, expect) in cases.items():
    if text is not None:
        with open(name, "w", encoding="utf-8") as f:
            f.write(text)
    stem = name.rsplit(".", 1)[0]
    with open(stem + ".expected.json", "w", encoding="utf-8") as f:
        json.dump(expect, f, indent=1)
        f.write("\n")
