"""loom installed the ways MCP servers install (issue 36), checked as a user's machine would.

`.ci/test` builds the host's artifacts with `packaging/dist.sh --profile dev` into LOOM_DIST and
runs this module with cargo and rustc off PATH, so nothing here can quietly build from source:

* the wheel, installed by uv into a fresh venv (`loom --version`, a bad config's exit code) and
  run as `uvx mcp-loom demo` with the artifacts folder as its only package index;
* the npm launcher and the host's platform package, installed offline into a fresh folder:
  `npx mcp-loom demo`, then loom served under the launcher to the official Python SDK, whose
  tools/list and calls equal the same client's through the binary run directly; SIGTERM through
  the launcher (loom's exit status comes back, no process left), a bad config's exit code, a
  platform without a build (a faked `process.platform`) and a missing platform package;
* the MCP Bundle, validated and read by the official `mcpb` CLI, its binary run;
* the archive against its checksum; `server.json` against the package files it describes;
  actionlint over every workflow.

Environment: LOOM_DIST (the artifacts), LOOM_BIN (the binary dist.sh packed, run directly for
the comparisons), LOOM_UV, LOOM_MCPB, LOOM_ACTIONLINT (the tools .ci/setup-packaging installed).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import threading
import time
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
# Hang guards, not timings: each is far beyond what the step takes (benches measure speed).
PATIENCE = 120.0


def _env_path(name: str) -> Path:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run these tests through .ci/test")
    path = Path(value)
    if not path.exists():
        raise RuntimeError(f"{name}={value} does not exist: run these tests through .ci/test")
    return path


DIST = _env_path("LOOM_DIST")
LOOM_DIRECT = _env_path("LOOM_BIN")
UV = _env_path("LOOM_UV")
MCPB = _env_path("LOOM_MCPB")
ACTIONLINT = _env_path("LOOM_ACTIONLINT")
VERSION = tomllib.loads((REPO / "Cargo.toml").read_text())["package"]["version"]
SERVER_NAME = "io.github.mcp-loom/mcp-loom"
# The host's npm platform package (dist.sh builds the host's artifacts).
HOST_PLATFORM = {"x86_64": "linux-x64", "aarch64": "linux-arm64"}[os.uname().machine]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def run(*args: Any, check: bool = True, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=PATIENCE, **kwargs)
    if check and done.returncode != 0:
        raise AssertionError(f"{args} exited {done.returncode}\nstdout: {done.stdout[-3000:]}\nstderr: {done.stderr[-3000:]}")
    return done


def test_no_rust_toolchain_on_path() -> None:
    """What follows runs as on a user's machine: nothing can be compiled (.ci/test takes cargo
    and rustc off PATH, or shadows them with stubs that fail)."""
    for tool in ("cargo", "rustc"):
        try:
            done = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=PATIENCE)
        except FileNotFoundError:
            continue
        assert done.returncode != 0, f"{tool} runs: {done.stdout}"


# ---------------------------------------------------------------------------------------------
# Artifacts and metadata


def only(pattern: str, folder: Path = DIST) -> Path:
    found = sorted(folder.glob(pattern))
    assert len(found) == 1, f"{pattern} in {folder}: {found}"
    return found[0]


def wheel() -> Path:
    return only(f"mcp_loom-{VERSION}-py3-none-*.whl")


def test_every_artifact_is_named_as_documented() -> None:
    # PyPI takes manylinux/musllinux tags, not a plain `linux` one.
    assert re.fullmatch(rf"mcp_loom-{re.escape(VERSION)}-py3-none-(manylinux|musllinux)\S*\.whl", wheel().name)
    only(f"npm/mcp-loom-{VERSION}.tgz")
    only(f"npm/mcp-loom-{HOST_PLATFORM}-{VERSION}.tgz")
    only(f"loom-{VERSION}.mcpb")
    only(f"loom-{VERSION}-*.tar.gz")
    only(f"loom-{VERSION}-*.tar.gz.sha256")


def test_the_wheel_is_the_binary_and_its_registry_marker() -> None:
    with zipfile.ZipFile(wheel()) as archive:
        names = archive.namelist()
        scripts = sorted(n.rpartition("/")[2] for n in names if ".data/scripts/" in n)
        # loom itself, and mcp-loom: what `uvx mcp-loom` runs (it hands over to loom).
        assert scripts == ["loom", "mcp-loom"], names
        assert not [n for n in names if n.endswith(".py")], names
        metadata = archive.read(f"mcp_loom-{VERSION}.dist-info/METADATA").decode()
    # The MCP Registry finds a PyPI package's server by this marker in its description.
    assert f"mcp-name: {SERVER_NAME}" in metadata
    assert f"Version: {VERSION}" in metadata


def test_the_archive_matches_its_checksum_and_holds_what_it_says() -> None:
    archive = only(f"loom-{VERSION}-*.tar.gz")
    checksum = only(f"loom-{VERSION}-*.tar.gz.sha256")
    expected, name = checksum.read_text().split()
    assert name == archive.name
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == expected
    # The same check a user runs.
    run("sha256sum", "-c", checksum.name, cwd=DIST)
    stem = archive.name.removesuffix(".tar.gz")
    with tarfile.open(archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert set(members) >= {f"{stem}/loom", f"{stem}/README.md", f"{stem}/LICENSE"}, sorted(members)
    assert members[f"{stem}/loom"].mode & 0o111, "the binary is not executable"


def test_server_json_describes_the_packages() -> None:
    server = json.loads((REPO / "server.json").read_text())
    assert server["$schema"].startswith("https://static.modelcontextprotocol.io/schemas/")
    assert server["name"] == SERVER_NAME
    assert re.fullmatch(r"[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+", server["name"])
    assert 1 <= len(server["description"]) <= 100, "the registry takes at most 100 characters"
    assert server["version"] == VERSION
    packages = {p["registryType"]: p for p in server["packages"]}
    assert set(packages) == {"pypi", "npm"}
    for package in packages.values():
        assert package["identifier"] == "mcp-loom" and package["version"] == VERSION
        assert package["transport"] == {"type": "stdio"}
        assert [a["name"] for a in package["packageArguments"]] == ["--config"]
        assert [e["name"] for e in package["environmentVariables"]] == ["LOOM_CONFIG"]
    # The markers the registry checks: mcpName in the npm package, mcp-name in the README.
    launcher = json.loads((REPO / "packaging/npm/mcp-loom/package.json").read_text())
    assert launcher["mcpName"] == SERVER_NAME
    assert f"mcp-name: {SERVER_NAME}" in (REPO / "README.md").read_text()


def test_workflows_pass_actionlint() -> None:
    workflows = sorted((REPO / ".github/workflows").glob("*.yml"))
    assert {w.name for w in workflows} >= {"ci.yml", "release.yml"}
    done = run(ACTIONLINT, "-verbose", *workflows, check=False, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Found 0 errors in {len(workflows)} files" in done.stderr, done.stderr


def test_actionlint_can_fail(tmp_path: Path) -> None:
    """The check above could pass by linting nothing: a broken workflow fails it."""
    (tmp_path / ".github/workflows").mkdir(parents=True)
    (tmp_path / ".github/workflows/bad.yml").write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: echo ${{ github.nope }}\n"
    )
    done = run(ACTIONLINT, tmp_path / ".github/workflows/bad.yml", check=False, cwd=tmp_path)
    assert done.returncode == 1 and "nope" in done.stdout, done.stdout


# ---------------------------------------------------------------------------------------------
# A config whose servers are the installed binary itself (its hidden demo servers)


def write_config(folder: Path, loom: Path | str) -> Path:
    config = folder / "loom.config.json"
    config.write_text(json.dumps({"servers": [{"name": "crm", "command": str(loom), "args": ["demo-server", "crm"]}]}))
    return config


def bad_config(folder: Path) -> Path:
    config = folder / "bad.config.json"
    config.write_text('{"servers": [{"name": "x"}]}')
    return config


async def session_summary(params: StdioServerParameters) -> dict[str, Any]:
    """What the official client sees: the tool names, a small call's result, and a large call's
    envelope queried back."""
    async with Client(params, read_timeout_seconds=PATIENCE, cache=None) as client:
        tools = sorted(tool.name for tool in (await client.list_tools()).tools)
        small = (await client.call_tool("crm_ping", {})).model_dump(by_alias=True, exclude_none=True)
        large = (await client.call_tool("crm_search_customers", {"limit": 3000})).model_dump(by_alias=True, exclude_none=True)
        envelope = json.loads(large["content"][0]["text"])
        counted = await client.call_tool("loom_query", {"sql": f"SELECT count(*) AS n FROM {envelope['ref']}"})
        return {
            "tools": tools,
            "small": small,
            "ref": envelope["ref"],
            "rows": envelope.get("rows"),
            "count": counted.model_dump(by_alias=True, exclude_none=True),
        }


# ---------------------------------------------------------------------------------------------
# The wheel, with uv


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("wheel") / "venv"
    run(UV, "venv", "--quiet", venv)
    run(UV, "pip", "install", "--quiet", "--offline", "--python", venv / "bin/python", wheel())
    return venv


def test_the_wheel_puts_loom_on_path(wheel_venv: Path) -> None:
    loom = wheel_venv / "bin/loom"
    assert run(loom, "--version").stdout.strip() == f"loom {VERSION}"


def test_the_wheels_loom_refuses_a_bad_config_with_exit_2(wheel_venv: Path, tmp_path: Path) -> None:
    done = run(wheel_venv / "bin/loom", "--config", bad_config(tmp_path), check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert "servers[0]" in done.stderr, done.stderr


def uvx(tmp_path: Path, *args: Any, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`uvx ARGS` as a user types it, with the artifacts folder as the only package index."""
    env = {**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_TOOL_DIR": str(tmp_path / "uv-tools")}
    return run(UV, "tool", "run", "--offline", "--no-index", "--find-links", DIST, *args, env=env, check=check, stdin=subprocess.DEVNULL)


def test_uvx_mcp_loom_runs_the_demo(tmp_path: Path) -> None:
    assert uvx(tmp_path, "mcp-loom", "--version").stdout.strip() == f"loom {VERSION}"
    done = uvx(tmp_path, "mcp-loom", "demo")
    assert "envelope" in done.stdout.lower(), done.stdout[-2000:]
    refused = uvx(tmp_path, "mcp-loom", "--config", bad_config(tmp_path), check=False)
    assert refused.returncode == 2, refused.stderr


async def test_the_wheels_loom_serves_as_the_binary_does(wheel_venv: Path, tmp_path: Path) -> None:
    installed = wheel_venv / "bin/loom"
    through_wheel = await session_summary(
        StdioServerParameters(command=str(installed), args=["--config", str(write_config(tmp_path, installed))])
    )
    direct_dir = tmp_path / "direct"
    direct_dir.mkdir()
    direct = await session_summary(
        StdioServerParameters(command=str(LOOM_DIRECT), args=["--config", str(write_config(direct_dir, LOOM_DIRECT))])
    )
    assert through_wheel == direct
    assert "crm_ping" in direct["tools"] and "loom_query" in direct["tools"]


# ---------------------------------------------------------------------------------------------
# npm: the launcher and the host's platform package


@pytest.fixture(scope="module")
def npm_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh folder with both tarballs installed offline, as `npm install` would from a registry
    that has them (an empty cache: nothing can come from anywhere else)."""
    project = tmp_path_factory.mktemp("npm")
    (project / "package.json").write_text('{"name": "user-project", "private": true}')
    env = {**os.environ, "npm_config_cache": str(project / ".npm-cache")}
    run(
        "npm", "install", "--offline", "--no-audit", "--no-fund",
        only(f"npm/mcp-loom-{HOST_PLATFORM}-{VERSION}.tgz"), only(f"npm/mcp-loom-{VERSION}.tgz"),
        cwd=project, env=env,
    )
    return project


def launcher(project: Path) -> Path:
    return project / "node_modules/.bin/mcp-loom"


def test_the_launcher_has_no_install_scripts(npm_project: Path) -> None:
    for package in ["mcp-loom", f"@mcp-loom/{HOST_PLATFORM}"]:
        manifest = json.loads((npm_project / "node_modules" / package / "package.json").read_text())
        assert not set(manifest.get("scripts", {})) & {"preinstall", "install", "postinstall", "prepare"}, manifest
    platform = json.loads((npm_project / f"node_modules/@mcp-loom/{HOST_PLATFORM}/package.json").read_text())
    assert (platform["os"], platform["cpu"], platform["version"]) == (["linux"], [HOST_PLATFORM.split("-")[1]], VERSION)
    launcher_manifest = json.loads((npm_project / "node_modules/mcp-loom/package.json").read_text())
    assert launcher_manifest["optionalDependencies"][f"@mcp-loom/{HOST_PLATFORM}"] == VERSION
    assert set(launcher_manifest["bin"]) == {"mcp-loom", "loom"}


def test_npx_runs_the_demo(npm_project: Path) -> None:
    done = run("npx", "--offline", "mcp-loom", "demo", cwd=npm_project)
    assert "envelope" in done.stdout.lower(), done.stdout[-2000:]
    assert run("npx", "--offline", "loom", "--version", cwd=npm_project).stdout.strip() == f"loom {VERSION}"


async def test_the_launcher_serves_as_the_binary_does(npm_project: Path, tmp_path: Path) -> None:
    installed = npm_project / f"node_modules/@mcp-loom/{HOST_PLATFORM}/bin/loom"
    through_npm = await session_summary(
        StdioServerParameters(command=str(launcher(npm_project)), args=["--config", str(write_config(tmp_path, installed))])
    )
    direct_dir = tmp_path / "direct"
    direct_dir.mkdir()
    direct = await session_summary(
        StdioServerParameters(command=str(LOOM_DIRECT), args=["--config", str(write_config(direct_dir, LOOM_DIRECT))])
    )
    assert through_npm == direct


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def under_the_launcher(npm_project: Path, tmp_path: Path) -> tuple[subprocess.Popen[bytes], set[int], Path]:
    """The launcher serving loom over the demo config, its handshake done: the process, its
    descendants (loom, and the demo server under loom) and the file its stderr goes to."""
    installed = npm_project / f"node_modules/@mcp-loom/{HOST_PLATFORM}/bin/loom"
    log = tmp_path / "launcher.stderr"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [str(launcher(npm_project)), "--config", str(write_config(tmp_path, installed))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
        )
    assert process.stdin is not None and process.stdout is not None
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "packaging-test", "version": "1"}}}
    process.stdin.write((json.dumps(hello) + "\n").encode())
    process.stdin.flush()
    # A hang guard on the answer: the read runs in a thread that is given up on.
    answers: list[bytes] = []
    reader = threading.Thread(target=lambda: answers.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(PATIENCE)
    assert answers, f"no answer to initialize; stderr: {log.read_text(errors='replace')[-2000:]}"
    assert json.loads(answers[0])["result"]["serverInfo"]["name"], answers
    family = descendants(process.pid)
    assert len(family) >= 2, family
    return process, family, log


def ended(process: subprocess.Popen[bytes], family: set[int]) -> None:
    try:
        process.wait(timeout=PATIENCE)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    deadline = time.monotonic() + PATIENCE
    while [pid for pid in family if alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in family if alive(pid)], f"left running: {family}"


def test_sigterm_through_the_launcher_ends_loom_and_its_servers(npm_project: Path, tmp_path: Path) -> None:
    process, family, log = under_the_launcher(npm_project, tmp_path)
    process.send_signal(signal.SIGTERM)
    ended(process, family)
    # loom exits 0 on SIGTERM (SPEC §6) and the launcher hands that back; -9 would be our kill
    # after PATIENCE (how long it takes is measured in benches/bounds.rs, not here).
    assert process.returncode == 0, (process.returncode, log.read_text(errors="replace")[-2000:])


def test_a_killed_loom_ends_the_launcher_by_the_same_signal(npm_project: Path, tmp_path: Path) -> None:
    process, family, _ = under_the_launcher(npm_project, tmp_path)
    # loom is the launcher's own child (the demo server under loom is a `loom` too).
    loom = next(pid for pid in family if parent_of(pid) == process.pid)
    os.kill(loom, signal.SIGKILL)
    ended(process, family)
    assert process.returncode == -signal.SIGKILL, process.returncode


def test_the_launcher_passes_a_bad_configs_exit_code(npm_project: Path, tmp_path: Path) -> None:
    done = run(launcher(npm_project), "--config", bad_config(tmp_path), check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert "servers[0]" in done.stderr, done.stderr


def test_the_launcher_names_a_platform_without_a_build(npm_project: Path, tmp_path: Path) -> None:
    fake = tmp_path / "fake-platform.cjs"
    fake.write_text('Object.defineProperty(process, "platform", { value: "aix" });\n')
    script = npm_project / "node_modules/mcp-loom/bin/loom.js"
    done = run("node", "--require", fake, script, "--version", check=False)
    assert done.returncode == 1, done
    assert done.stdout == ""
    assert f"no loom build for this platform (aix-{os.uname().machine.replace('x86_64', 'x64').replace('aarch64', 'arm64')})" in done.stderr, done.stderr
    assert "linux-x64 (glibc or musl), linux-arm64 (glibc), darwin-arm64, darwin-x64" in done.stderr
    assert "cargo install mcp-loom" in done.stderr


def test_the_launcher_explains_a_missing_platform_package(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "package.json").write_text('{"name": "user-project", "private": true}')
    env = {**os.environ, "npm_config_cache": str(tmp_path / ".npm-cache")}
    run("npm", "install", "--offline", "--omit=optional", "--no-audit", "--no-fund", only(f"npm/mcp-loom-{VERSION}.tgz"), cwd=project, env=env)
    done = run(launcher(project), "--version", check=False)
    assert done.returncode == 1 and done.stdout == "", done
    for needed in [f"@mcp-loom/{HOST_PLATFORM}", "npm install --include=optional mcp-loom", "uvx mcp-loom", "cargo install mcp-loom"]:
        assert needed in done.stderr, (needed, done.stderr)


# ---------------------------------------------------------------------------------------------
# The MCP Bundle


def test_the_bundle_validates_and_runs(tmp_path: Path) -> None:
    bundle = only(f"loom-{VERSION}.mcpb")
    info = run(MCPB, "info", bundle)
    assert VERSION in info.stdout, info.stdout
    unpacked = tmp_path / "unpacked"
    run(MCPB, "unpack", bundle, unpacked)
    run(MCPB, "validate", unpacked / "manifest.json")
    manifest = json.loads((unpacked / "manifest.json").read_text())
    assert manifest["version"] == VERSION
    assert manifest["server"]["type"] == "binary"
    assert manifest["server"]["mcp_config"]["args"] == ["--config", "${user_config.config_file}"]
    field = manifest["user_config"]["config_file"]
    assert (field["type"], field["required"]) == ("file", True)
    assert manifest["compatibility"]["platforms"] == [sys.platform]
    binary = unpacked / manifest["server"]["entry_point"]
    assert run(binary, "--version").stdout.strip() == f"loom {VERSION}"
