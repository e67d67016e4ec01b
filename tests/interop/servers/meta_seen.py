"""What a test server answers when asked which `_meta` its request carried (servers/python_server.py
`echo_meta`, telemetry/traced_server.py `meta`): shared so both say it the same way."""

from __future__ import annotations

import json
from typing import Any


def meta_seen(meta: Any) -> str:
    """`meta` as JSON, without the progress token and the 2026-07-28 envelope (they belong to
    the connection, not to what the client sent)."""
    raw = meta.model_dump(by_alias=True, exclude_none=True) if hasattr(meta, "model_dump") else dict(meta or {})
    kept = {
        key: value
        for key, value in raw.items()
        if key not in ("progressToken", "progress_token") and not key.startswith("io.modelcontextprotocol/")
    }
    return json.dumps(kept, sort_keys=True)
