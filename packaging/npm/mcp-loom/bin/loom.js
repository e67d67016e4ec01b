#!/usr/bin/env node
// The `mcp-loom` npm launcher: finds loom's binary in the platform package npm installed as an
// optional dependency (@mcp-loom/<os>-<arch>) and runs it in its place. Nothing runs at install
// time and nothing is downloaded, so it works with --ignore-scripts, offline mirrors and proxies.
//
// stdio is inherited, not piped: the MCP stream goes straight between the client and loom, and
// stdout stays the protocol's alone. SIGINT, SIGTERM and SIGHUP are passed on, and loom's exit
// code (or the signal that ended it) comes back as this process's own.
"use strict";

const { spawn } = require("node:child_process");
const os = require("node:os");
const path = require("node:path");

// The platform packages this version publishes, in the order a machine prefers them. Keep in step
// with the target table in packaging/dist.sh and the matrix in .github/workflows/release.yml.
// loom is Unix-only for now (no win32 package).
const PACKAGES = {
  "linux-x64": { glibc: ["linux-x64", "linux-x64-musl"], musl: ["linux-x64-musl"] },
  "linux-arm64": { glibc: ["linux-arm64"], musl: [] },
  "darwin-arm64": ["darwin-arm64"],
  "darwin-x64": ["darwin-x64"],
};
const SUPPORTED = "linux-x64 (glibc or musl), linux-arm64 (glibc), darwin-arm64, darwin-x64";

function fail(lines) {
  process.stderr.write(lines.map((line) => `mcp-loom: ${line}\n`).join(""));
  process.exit(1);
}

// A musl libc (Alpine) has no glibc version in Node's own report.
function libc() {
  if (process.platform !== "linux") return null;
  try {
    const header = process.report.getReport().header;
    return header.glibcVersionRuntime ? "glibc" : "musl";
  } catch {
    return "glibc";
  }
}

function candidates(platform) {
  const entry = PACKAGES[platform];
  if (entry === undefined) return undefined;
  return Array.isArray(entry) ? entry : entry[libc()];
}

function findBinary() {
  const platform = `${process.platform}-${process.arch}`;
  const names = candidates(platform);
  if (names === undefined || names.length === 0) {
    fail([
      `no loom build for this platform (${platform}${libc() === "musl" ? ", musl libc" : ""}).`,
      `Builds exist for: ${SUPPORTED}.`,
      "Elsewhere, build it from source with `cargo install mcp-loom` (Rust 1.94 or newer).",
    ]);
  }
  for (const name of names) {
    try {
      const manifest = require.resolve(`@mcp-loom/${name}/package.json`);
      return path.join(path.dirname(manifest), "bin", "loom");
    } catch {
      // Not installed; try the next one this platform can run.
    }
  }
  fail([
    `the package with loom's binary for ${platform} (@mcp-loom/${names[0]}) is not installed.`,
    "npm installs it as an optional dependency of mcp-loom; it is missing when optional",
    "dependencies were turned off (--omit=optional, --no-optional) or the lockfile was made",
    "on another platform. Fix it with one of:",
    "  npm install --include=optional mcp-loom",
    "  uvx mcp-loom            (the same binary from PyPI)",
    "  cargo install mcp-loom  (build from source)",
    `Builds exist for: ${SUPPORTED}.`,
  ]);
}

const binary = findBinary();
const child = spawn(binary, process.argv.slice(2), { stdio: "inherit" });

const forwarded = ["SIGINT", "SIGTERM", "SIGHUP"];
const forward = (signal) => {
  if (child.exitCode === null && child.signalCode === null) child.kill(signal);
};
for (const signal of forwarded) process.on(signal, forward);

child.on("error", (error) => {
  fail([`cannot run ${binary}: ${error.message}`]);
});

child.on("exit", (code, signal) => {
  if (signal !== null) {
    // Ended by a signal: end the same way, so a supervisor sees what it would see running loom
    // directly (the handlers above would otherwise catch our own re-raise). Node ignores some
    // signals itself (SIGPIPE; SIGUSR1 starts its inspector): then the shell's convention,
    // 128 + the signal's number, is the exit code, never 0.
    for (const name of forwarded) process.removeAllListeners(name);
    process.exitCode = 128 + (os.constants.signals[signal] ?? 0);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code ?? 1);
});
