#!/usr/bin/env python3
"""A stand-in for `$BROWSER` in the OAuth tests: `browser.py URL`.

It follows an authorization URL the way a user's browser would (a cookie jar, every redirect of
the authorization server in as.mjs, its interaction pages, which log in `test-user` and consent)
until the redirect leaves the authorization server: that is the client's redirect URI
(`http://127.0.0.1:PORT/callback?code=…&state=…&iss=…`), which it then requests.

It returns at once: the work goes on in a forked child (the parent exits 0), because the program
that starts it (loom) may not wait for it. `LOOM_TEST_BROWSER_FOREGROUND=1` does it in the
foreground instead.

Env:
  LOOM_TEST_BROWSER_MODE   approve (default) | deny (the interaction ends with access_denied) |
                           tamper-state (the callback's `state` is changed) | wrong-iss (the
                           callback's `iss` names another server) | none (do nothing)
  LOOM_TEST_BROWSER_LOG    a file to append one JSON line to per run: mode, url, the steps taken,
                           the callback URL requested, its status and body, or the error
  LOOM_TEST_BROWSER_FOREGROUND  1: no fork

Standard library only, so any python3 runs it.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

MODES = ("approve", "deny", "tamper-state", "wrong-iss", "none")
WRONG_ISS = "http://127.0.0.1:9/not-the-issuer"
TIMEOUT = 15.0
MAX_HOPS = 20


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001
        return None


def _origin(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme, parts.netloc


def _with_query(url: str, change: dict[str, str]) -> str:
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    seen = set()
    out = []
    for key, value in query:
        if key in change:
            seen.add(key)
            value = change[key]
        out.append((key, value))
    out += [(key, value) for key, value in change.items() if key not in seen]
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(out)))


def _request(opener: urllib.request.OpenerDirector, url: str) -> tuple[int, dict[str, str], str]:
    try:
        with opener.open(urllib.request.Request(url, headers={"Accept": "text/html,application/json"}), timeout=TIMEOUT) as response:
            return response.status, dict(response.headers), response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers or {}), error.read().decode("utf-8", "replace")


def run(url: str, mode: str = "approve") -> dict[str, Any]:
    """Follows `url` to the client's redirect URI and requests it; what happened, as a dict."""
    record: dict[str, Any] = {"mode": mode, "url": url, "steps": [], "started": time.time()}
    if mode not in MODES:
        record["error"] = f"unknown LOOM_TEST_BROWSER_MODE {mode!r} (one of {', '.join(MODES)})"
        return record
    if mode == "none":
        return record
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), _NoRedirect())
    as_origin = _origin(url)
    current = url
    denied = False
    for _ in range(MAX_HOPS):
        if _origin(current) != as_origin:
            break  # left the authorization server: the client's redirect URI
        if mode == "deny" and not denied and urllib.parse.urlsplit(current).path.startswith("/interaction/"):
            current = _with_query(current, {"decision": "deny"})
            denied = True
        status, headers, body = _request(opener, current)
        record["steps"].append({"url": current, "status": status})
        location = headers.get("Location") or headers.get("location")
        if status not in (301, 302, 303, 307, 308) or not location:
            record["error"] = f"the authorization server answered {status} without a redirect: {body[:500]}"
            return record
        current = urllib.parse.urljoin(current, location)
    else:
        record["error"] = f"more than {MAX_HOPS} redirects"
        return record

    record["callback_original"] = current
    if mode == "tamper-state":
        state = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(current).query)).get("state", "")
        current = _with_query(current, {"state": state + "-tampered"})
    elif mode == "wrong-iss":
        current = _with_query(current, {"iss": WRONG_ISS})
    record["callback"] = current
    try:
        status, _headers, body = _request(urllib.request.build_opener(_NoRedirect()), current)
        record["callback_status"] = status
        record["callback_body"] = body[:2000]
    except OSError as error:
        record["error"] = f"requesting the callback failed: {error}"
    return record


def _write_log(record: dict[str, Any]) -> None:
    path = os.environ.get("LOOM_TEST_BROWSER_LOG")
    if not path:
        return
    record["finished"] = time.time()
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: browser.py URL", file=sys.stderr)
        return 2
    url = argv[1]
    mode = os.environ.get("LOOM_TEST_BROWSER_MODE") or "approve"
    foreground = os.environ.get("LOOM_TEST_BROWSER_FOREGROUND", "") not in ("", "0", "false")
    if not foreground and hasattr(os, "fork"):
        if os.fork() > 0:
            return 0
        # The child: out of the parent's session, without its terminal streams.
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
    try:
        record = run(url, mode)
    except Exception as error:  # noqa: BLE001 - whatever happened goes to the log
        record = {"mode": mode, "url": url, "error": f"{type(error).__name__}: {error}"}
    _write_log(record)
    if foreground:
        print(json.dumps(record), file=sys.stderr)
    if not foreground:
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
