"""A protected MCP server for the OAuth tests: the official Python SDK (2.x) as an OAuth resource
server (MCP authorization spec), in front of the authorization server in as.mjs.

    protected_server.py --as AS_URL [--port PORT] [--scopes "mcp:read"]

PORT 0 or absent: a free port. Prints `MCP_URL=http://127.0.0.1:PORT/mcp` on stdout once it
listens; logs go to stderr. AS_URL may come from env AS_URL instead, PORT from MCP_PORT, the
required scopes from MCP_REQUIRED_SCOPES (space-separated, default "mcp:read"), and
--max-token-age from MCP_MAX_TOKEN_AGE (seconds: tokens issued longer ago get 401 though not
expired yet, so a client has to refresh on the 401 rather than from expires_in).

- Streamable HTTP at /mcp; Protected Resource Metadata (RFC 9728) at
  /.well-known/oauth-protected-resource/mcp naming AS_URL, with the required scopes as
  `scopes_supported`.
- A request without a valid token gets 401 with
  `WWW-Authenticate: Bearer error=…, resource_metadata="…"` (403 insufficient_scope when a
  required scope is missing): the SDK's own RequireAuthMiddleware.
- Tokens are verified as JWTs against the AS's JWKS (PyJWKClient): RS256 signature, `iss` ==
  AS_URL, `aud` == this server's /mcp URL exactly, `exp`.
- Tools: `whoami` (the token's sub, client_id and scopes), `echo`, `big_table` (5,000 rows of JSON
  in one text block), `auth_stats` (the counters below, as JSON).
- Counters: requests with/without a bearer token, 401s and 403s, distinct access tokens
  accepted, tokens rejected and why; also at GET /test/stats (no token needed), and one stderr
  line per new token accepted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import socket
import sys
import time
from typing import Any

import anyio
import anyio.to_thread
import jwt
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer

log = logging.getLogger("protected_server")

STATS: dict[str, Any] = {
    "requests": 0,
    "requests_with_bearer": 0,
    "requests_without_bearer": 0,
    "status_401": 0,
    "status_403": 0,
    "tokens_accepted": 0,  # distinct access tokens that verified
    "tokens_rejected": {},  # reason -> count
    "subjects": [],
    "clients": [],
}
_seen_tokens: set[str] = set()


class JwksTokenVerifier:
    """The SDK's TokenVerifier protocol, with pyjwt: a JWT access token from `issuer`, for `audience`."""

    def __init__(self, issuer: str, audience: str, max_age: float | None = None) -> None:
        self.issuer = issuer
        self.audience = audience
        self.max_age = max_age
        self.jwks = jwt.PyJWKClient(f"{issuer}/jwks", cache_keys=True, lifespan=300, timeout=10)

    def _decode(self, token: str) -> dict[str, Any]:
        key = self.jwks.get_signing_key_from_jwt(token)
        return jwt.decode(
            token,
            key.key,
            algorithms=["RS256"],
            audience=self.audience,
            issuer=self.issuer,
            options={"require": ["exp", "iss", "aud", "sub"]},
            leeway=0,
        )

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            claims = await anyio.to_thread.run_sync(self._decode, token)
        except Exception as error:  # noqa: BLE001 - every failure is a rejected token
            reason = type(error).__name__
            STATS["tokens_rejected"][reason] = STATS["tokens_rejected"].get(reason, 0) + 1
            log.warning("token rejected: %s: %s", reason, error)
            return None
        if self.max_age is not None and time.time() - claims.get("iat", 0) > self.max_age:
            STATS["tokens_rejected"]["TooOld"] = STATS["tokens_rejected"].get("TooOld", 0) + 1
            log.warning("token rejected: older than MCP_MAX_TOKEN_AGE (%s s)", self.max_age)
            return None
        digest = hashlib.sha256(token.encode()).hexdigest()[:16]
        if digest not in _seen_tokens:
            _seen_tokens.add(digest)
            STATS["tokens_accepted"] = len(_seen_tokens)
            for key, value in (("subjects", claims.get("sub")), ("clients", claims.get("client_id"))):
                if value and value not in STATS[key]:
                    STATS[key].append(value)
            log.warning(
                "new access token #%d: sub=%s client_id=%s scope=%r aud=%r exp in %ds",
                len(_seen_tokens),
                claims.get("sub"),
                claims.get("client_id"),
                claims.get("scope"),
                claims.get("aud"),
                int(claims["exp"] - time.time()),
            )
        aud = claims["aud"]
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id") or claims.get("azp") or ""),
            scopes=str(claims.get("scope") or "").split(),
            expires_at=int(claims["exp"]),
            resource=self.audience if isinstance(aud, list) else aud,
            subject=claims.get("sub"),
            claims={key: claims[key] for key in ("iss", "jti", "iat") if key in claims},
        )


class Counting:
    """ASGI wrapper: counts requests, bearer tokens and 401/403 answers; serves GET /test/stats."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        if scope["path"] == "/test/stats" and scope["method"] == "GET":
            body = json.dumps(STATS).encode()
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        if scope["path"].startswith("/mcp"):
            STATS["requests"] += 1
            bearer = dict(scope["headers"]).get(b"authorization", b"").lower().startswith(b"bearer ")
            STATS["requests_with_bearer" if bearer else "requests_without_bearer"] += 1

        async def counting_send(message: Any) -> None:
            if message["type"] == "http.response.start" and message["status"] in (401, 403):
                STATS[f"status_{message['status']}"] += 1
                log.warning("%s %s -> %d", scope["method"], scope["path"], message["status"])
            await send(message)

        await self.inner(scope, receive, counting_send)


def build(as_url: str, mcp_url: str, required_scopes: list[str], max_age: float | None = None) -> Any:
    app = MCPServer(
        "interop-protected",
        token_verifier=JwksTokenVerifier(as_url, mcp_url, max_age),
        auth=AuthSettings(
            issuer_url=as_url,
            resource_server_url=mcp_url,
            required_scopes=required_scopes,
            validate_token_resource=True,
        ),
    )

    @app.tool()
    def whoami() -> str:
        """Who the access token is for: its subject, client and scopes."""
        token = get_access_token()
        if token is None:
            return "no access token"
        return f"sub={token.subject} client_id={token.client_id} scopes={' '.join(token.scopes)}"

    @app.tool()
    def echo(text: str) -> str:
        """Returns the text it was given."""
        return text

    @app.tool()
    def big_table() -> str:
        """5,000 rows of JSON, as one text block."""
        regions = ["north", "south", "east", "west"]
        rows = [
            {"id": i, "name": f"item-{i:05d}", "region": regions[i % 4], "quantity": (i * 37) % 1000, "price": round((i % 250) * 1.25 + 0.99, 2)}
            for i in range(5000)
        ]
        return json.dumps(rows)

    @app.tool()
    def auth_stats() -> str:
        """The server's authorization counters, as JSON."""
        return json.dumps(STATS)

    return Counting(app.streamable_http_app(host="127.0.0.1"))


async def serve(sock: socket.socket, http_app: Any, mcp_url: str) -> None:
    import uvicorn

    config = uvicorn.Config(http_app, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)

    async def announce() -> None:
        while not server.started:
            await anyio.sleep(0.02)
        print(f"MCP_URL={mcp_url}", flush=True)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(announce)
        await server.serve(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--as", dest="as_url", default=os.environ.get("AS_URL"), help="the authorization server's URL (issuer)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("MCP_PORT") or 0))
    parser.add_argument("--scopes", default=os.environ.get("MCP_REQUIRED_SCOPES") or "mcp:read", help="required scopes, space-separated")
    parser.add_argument(
        "--max-token-age",
        type=float,
        default=float(os.environ["MCP_MAX_TOKEN_AGE"]) if os.environ.get("MCP_MAX_TOKEN_AGE") else None,
        help="refuse (401) tokens issued more than this many seconds ago, though not expired: a client must refresh on a 401",
    )
    options = parser.parse_args()
    if not options.as_url:
        parser.error("--as AS_URL (or env AS_URL) is required")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="[mcp %(asctime)s] %(message)s")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", options.port))
    sock.listen(128)
    mcp_url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    http_app = build(options.as_url.rstrip("/"), mcp_url, options.scopes.split(), options.max_token_age)
    anyio.run(serve, sock, http_app, mcp_url)


if __name__ == "__main__":
    main()
