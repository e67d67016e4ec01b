// A real OAuth 2.1 authorization server for the interop tests: npm `oidc-provider` (panva, pinned
// in .ci/node/package.json) on 127.0.0.1, with interactions a script completes (browser.py).
//
//   node as.mjs [PORT]        PORT (or env AS_PORT) 0 or absent: a free port
//
// Prints `AS_URL=http://127.0.0.1:PORT` on stdout once it listens; logs go to stderr.
// What it does (README.md beside this file has the details):
//   - issuer = AS_URL; metadata at /.well-known/openid-configuration and (same document)
//     /.well-known/oauth-authorization-server (RFC 8414), unless AS_DISCOVERY says otherwise
//   - authorization code flow with PKCE required (S256 only); `iss` in every authorization
//     response (RFC 9207, always on in oidc-provider)
//   - open Dynamic Client Registration at /reg (no initial access token); native clients'
//     loopback redirect URIs match on any port (RFC 8252 §7.3); AS_NO_REGISTRATION=1 turns it off
//   - resource indicators (RFC 8707): any requested resource gets an RS256 JWT access token with
//     `aud` = that resource and `scope` = the requested ones among mcp:read mcp:write
//   - refresh tokens for every client allowed the refresh_token grant (no offline_access or
//     prompt=consent needed), rotated on every use (AS_ROTATE_REFRESH=0: never rotated)
//   - interactions: /interaction/UID logs in `test-user` and grants what was asked, or ends with
//     access_denied when the URL has ?decision=deny
//   - test endpoints: POST /test/revoke (drop every grant, refresh token, session),
//     GET /test/stats (counters, JSON)
//
// Env: AS_PORT, AS_ACCESS_TTL (s, default 60), AS_REFRESH_TTL (s, default 14 days),
// AS_SCOPES (resource scopes, default "mcp:read mcp:write"), AS_STATIC_CLIENT_ID,
// AS_STATIC_CLIENT_SECRET, AS_STATIC_REDIRECT_URIS, AS_NO_REGISTRATION, AS_ROTATE_REFRESH,
// AS_TOKEN_DELAY_MS (each POST /token answered that much later, default 0),
// AS_DISCOVERY (both | oidc | oauth), AS_ACCOUNT (default test-user; an authorization request's
// login_hint picks another).

import { createRequire } from "node:module";
import crypto from "node:crypto";
import http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";

// oidc-provider sits in .ci/node/node_modules (installed by .ci/setup-interop), not beside this file.
const here = path.dirname(fileURLToPath(import.meta.url));
const modules = path.resolve(here, "../../../.ci/node/node_modules");
const { default: Provider, errors } = await import(createRequire(path.join(modules, "x.js")).resolve("oidc-provider"));

const log = (...args) => console.error(`[as ${new Date().toISOString().slice(11, 23)}]`, ...args);
const env = process.env;
const flag = (name) => !["", "0", "false", undefined].includes(env[name]);
const int = (name, fallback) => (env[name] ? Number.parseInt(env[name], 10) : fallback);

const port = Number.parseInt(process.argv[2] ?? env.AS_PORT ?? "0", 10);
const accessTtl = int("AS_ACCESS_TTL", 60);
const refreshTtl = int("AS_REFRESH_TTL", 14 * 24 * 3600);
const resourceScopes = (env.AS_SCOPES || "mcp:read mcp:write").split(/\s+/).filter(Boolean);
const account = env.AS_ACCOUNT || "test-user";
const registration = !flag("AS_NO_REGISTRATION");
const rotate = env.AS_ROTATE_REFRESH === undefined ? true : flag("AS_ROTATE_REFRESH");
const tokenDelay = int("AS_TOKEN_DELAY_MS", 0);
const discovery = env.AS_DISCOVERY || "both";

// ---------------------------------------------------------------------------------------------
// Storage: a plain in-memory adapter, so /test/revoke can find every refresh token and grant.

const store = new Map(); // `${model}:${id}` -> { payload, expiresAt }
const epoch = () => Math.floor(Date.now() / 1000);

class MemoryAdapter {
  constructor(model) {
    this.model = model;
  }
  key(id) {
    return `${this.model}:${id}`;
  }
  async upsert(id, payload, expiresIn) {
    store.set(this.key(id), { payload, expiresAt: expiresIn ? Date.now() + expiresIn * 1000 : Infinity });
  }
  get(key) {
    const entry = store.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= Date.now()) {
      store.delete(key);
      return undefined;
    }
    return entry.payload;
  }
  async find(id) {
    return this.get(this.key(id));
  }
  async findByUid(uid) {
    for (const [key, entry] of store) {
      if (key.startsWith(`${this.model}:`) && entry.payload.uid === uid) return this.get(key);
    }
    return undefined;
  }
  async findByUserCode(userCode) {
    for (const [key, entry] of store) {
      if (key.startsWith(`${this.model}:`) && entry.payload.userCode === userCode) return this.get(key);
    }
    return undefined;
  }
  async consume(id) {
    const payload = this.get(this.key(id));
    if (payload) payload.consumed = epoch();
  }
  async destroy(id) {
    store.delete(this.key(id));
  }
  async revokeByGrantId(grantId) {
    for (const [key, entry] of store) {
      if (entry.payload.grantId === grantId) store.delete(key);
    }
  }
}

function revokeAll() {
  const dropped = {};
  for (const key of [...store.keys()]) {
    const model = key.slice(0, key.indexOf(":"));
    if (["RefreshToken", "Grant", "Session", "AuthorizationCode", "AccessToken"].includes(model)) {
      store.delete(key);
      dropped[model] = (dropped[model] ?? 0) + 1;
    }
  }
  return dropped;
}

// ---------------------------------------------------------------------------------------------
// Counters for GET /test/stats.

const stats = {
  registrations: 0,
  authorizations: 0,
  denials: 0,
  tokens: {}, // grant_type -> successful token responses
  token_errors: {}, // error -> count
  interactions: 0,
};

// ---------------------------------------------------------------------------------------------

const server = http.createServer();
await new Promise((resolve, reject) => {
  server.once("error", reject);
  server.listen(port, "127.0.0.1", resolve);
});
const issuer = `http://127.0.0.1:${server.address().port}`;

const { privateKey } = crypto.generateKeyPairSync("rsa", { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: "jwk" }), kid: crypto.randomUUID(), alg: "RS256", use: "sig" };

const clients = [];
if (env.AS_STATIC_CLIENT_ID) {
  clients.push({
    client_id: env.AS_STATIC_CLIENT_ID,
    client_secret: env.AS_STATIC_CLIENT_SECRET || "static-secret",
    client_name: "loom interop static client",
    // native: its loopback redirect URIs match on any port
    application_type: "native",
    redirect_uris: (env.AS_STATIC_REDIRECT_URIS || "http://127.0.0.1/callback http://localhost/callback").split(/[\s,]+/).filter(Boolean),
    grant_types: ["authorization_code", "refresh_token", "client_credentials"],
    response_types: ["code"],
    token_endpoint_auth_method: "client_secret_basic",
  });
}

const provider = new Provider(issuer, {
  adapter: MemoryAdapter,
  clients,
  jwks: { keys: [jwk] },
  cookies: { keys: [crypto.randomBytes(32).toString("hex")] },
  scopes: ["openid", "offline_access", ...resourceScopes],
  responseTypes: ["code"],
  claims: { openid: ["sub"] },
  findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
  pkce: { required: () => true },
  clientDefaults: {
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: "none",
  },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: registration, initialAccessToken: false },
    revocation: { enabled: true },
    introspection: { enabled: true },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (_ctx, _client, oneOf) => oneOf,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (_ctx, resource) => {
        let url;
        try {
          url = new URL(resource);
        } catch {
          throw new errors.InvalidTarget();
        }
        if (url.hash) throw new errors.InvalidTarget();
        return {
          scope: resourceScopes.join(" "),
          audience: resource,
          accessTokenTTL: accessTtl,
          accessTokenFormat: "jwt",
          jwt: { sign: { alg: "RS256" } },
        };
      },
    },
  },
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed("refresh_token"),
  rotateRefreshToken: () => rotate,
  ttl: {
    AccessToken: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? accessTtl,
    ClientCredentials: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? accessTtl,
    AuthorizationCode: 60,
    IdToken: 3600,
    RefreshToken: refreshTtl,
    Interaction: 600,
    Session: 3600,
    Grant: refreshTtl,
  },
  interactions: { url: async (_ctx, interaction) => `/interaction/${interaction.uid}` },
  renderError: async (ctx, out) => {
    ctx.type = "json";
    ctx.body = out;
  },
});

provider.on("registration_create.success", (_ctx, client) => {
  stats.registrations += 1;
  log("registered", client.clientId, client.applicationType, JSON.stringify(client.redirectUris));
});
provider.on("authorization.success", () => {
  stats.authorizations += 1;
});
provider.on("grant.success", (ctx) => {
  const type = ctx.oidc.params?.grant_type ?? "?";
  stats.tokens[type] = (stats.tokens[type] ?? 0) + 1;
  log("token", type, "client", ctx.oidc.client?.clientId);
});
provider.on("grant.error", (ctx, error) => {
  stats.token_errors[error.error ?? "?"] = (stats.token_errors[error.error ?? "?"] ?? 0) + 1;
  log("token error", ctx.oidc?.params?.grant_type, error.error, error.error_description);
});
provider.on("authorization.error", (_ctx, error) => log("authorization error", error.error, error.error_description));
provider.on("registration_create.error", (_ctx, error) => log("registration error", error.error, error.error_description));
provider.on("server_error", (_ctx, error) => log("server error", error));

const handle = provider.callback();

function json(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

async function interaction(req, res, url) {
  stats.interactions += 1;
  const details = await provider.interactionDetails(req, res);
  const { prompt, params, session } = details;
  log("interaction", details.uid, prompt.name, JSON.stringify(prompt.details), "client", params.client_id);
  if (url.searchParams.get("decision") === "deny") {
    stats.denials += 1;
    await provider.interactionFinished(req, res, { error: "access_denied", error_description: "the test user denied the request" }, { mergeWithLastSubmission: false });
    return;
  }
  if (prompt.name === "login") {
    // `login_hint` picks the account (tests of two users); else AS_ACCOUNT.
    await provider.interactionFinished(req, res, { login: { accountId: params.login_hint || account } }, { mergeWithLastSubmission: false });
    return;
  }
  // consent: grant every scope and resource scope asked for
  let grant = details.grantId ? await provider.Grant.find(details.grantId) : undefined;
  grant ??= new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  const missing = prompt.details;
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(" "));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [resource, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
    grant.addResourceScope(resource, scopes.join(" "));
  }
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

server.on("request", async (req, res) => {
  const url = new URL(req.url, issuer);
  log(req.method, url.pathname + (url.search.length > 120 ? `${url.search.slice(0, 120)}…` : url.search));
  try {
    if (url.pathname.startsWith("/interaction/") && req.method === "GET") {
      await interaction(req, res, url);
      return;
    }
    if (url.pathname === "/test/revoke" && req.method === "POST") {
      const dropped = revokeAll();
      log("revoked", JSON.stringify(dropped));
      json(res, 200, { revoked: dropped });
      return;
    }
    if (url.pathname === "/test/stats" && req.method === "GET") {
      json(res, 200, stats);
      return;
    }
    if (url.pathname === "/.well-known/oauth-authorization-server" || url.pathname.startsWith("/.well-known/oauth-authorization-server/")) {
      if (discovery === "oidc") return json(res, 404, { error: "not_found" });
      req.url = `/.well-known/openid-configuration${url.search}`;
    } else if (url.pathname === "/.well-known/openid-configuration" && discovery === "oauth") {
      return json(res, 404, { error: "not_found" });
    }
    if (url.pathname === "/token" && req.method === "POST" && tokenDelay > 0) {
      // Slow token answers: two clients refreshing one login at once overlap for sure.
      await new Promise((resolve) => setTimeout(resolve, tokenDelay));
    }
    handle(req, res);
  } catch (error) {
    log("error", error);
    if (!res.headersSent) json(res, 500, { error: "server_error", error_description: String(error?.message ?? error) });
  }
});

process.on("SIGTERM", () => process.exit(0));
process.on("SIGINT", () => process.exit(0));
log(`issuer ${issuer}, access token TTL ${accessTtl} s, registration ${registration ? "open" : "off"}, refresh rotation ${rotate ? "on" : "off"}${env.AS_STATIC_CLIENT_ID ? `, static client ${env.AS_STATIC_CLIENT_ID}` : ""}`);
process.stdout.write(`AS_URL=${issuer}\n`);
