#!/usr/bin/env bash
# Builds loom's distributable artifacts for one platform (the host, or --target):
#
#   DIR/mcp_loom-<version>-py3-none-<platform>.whl  the wheel `uvx mcp-loom` installs (maturin,
#                                                    bindings = "bin": the binary on PATH)
#   DIR/npm/mcp-loom-<version>.tgz                   the npm launcher (`npx mcp-loom`)
#   DIR/npm/mcp-loom-<os>-<arch>-<version>.tgz       @mcp-loom/<os>-<arch>: the binary, an optional
#                                                    dependency of the launcher (os/cpu set)
#   DIR/loom-<version>.mcpb                          an MCP Bundle for Claude Desktop
#   DIR/loom-<version>-<target>.tar.gz (+ .sha256)   the binary, README and LICENSE
#
# Usage: packaging/dist.sh [--profile release|dev] [--out DIR] [--target TRIPLE] [--manylinux TAG]
#
# --manylinux TAG (Linux glibc targets) links with zig for an older glibc, e.g. manylinux_2_17,
# so the wheel installs on older distributions than the build machine's (maturin's own way).
#
# It reuses the cargo target directory it is given (CARGO_TARGET_DIR, else ./target), so after
# `cargo test` a dev-profile run builds little more than loom itself. What it needs besides
# cargo, python3 and node/npm it installs into a folder of its own (LOOM_DIST_TOOLS, else
# <target dir>/dist-tools): maturin from PyPI (with ziglang for --manylinux), the MCP Bundle CLI
# from npm, both pinned below.
set -euo pipefail

MATURIN_VERSION=1.16.0
MCPB_VERSION=2.1.2

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

profile=release
out=dist
target=""
manylinux=""
while [ $# -gt 0 ]; do
    case "$1" in
        --profile) profile="${2:-}"; shift 2 ;;
        --profile=*) profile="${1#*=}"; shift ;;
        --out) out="${2:-}"; shift 2 ;;
        --out=*) out="${1#*=}"; shift ;;
        --target) target="${2:-}"; shift 2 ;;
        --target=*) target="${1#*=}"; shift ;;
        --manylinux) manylinux="${2:-}"; shift 2 ;;
        --manylinux=*) manylinux="${1#*=}"; shift ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "dist.sh: unknown argument '$1' (expected --profile release|dev, --out DIR, --target TRIPLE, --manylinux TAG)" >&2; exit 2 ;;
    esac
done
case "$profile" in
    release|dev) ;;
    *) echo "dist.sh: --profile must be 'release' or 'dev', not '$profile'" >&2; exit 2 ;;
esac
[ -n "$out" ] || { echo "dist.sh: --out needs a directory" >&2; exit 2; }

for tool in cargo rustc node npm tar; do
    command -v "$tool" >/dev/null || { echo "dist.sh: needs $tool on PATH" >&2; exit 2; }
done
# Some machines have `python`, not `python3`.
python=$(command -v python3 || command -v python || true)
[ -n "$python" ] || { echo "dist.sh: needs python3 (or python) on PATH" >&2; exit 2; }

host="$(rustc -vV | sed -n 's/^host: //p')"
target="${target:-$host}"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
tools="${LOOM_DIST_TOOLS:-$target_dir/dist-tools}"
version="$(cargo metadata --no-deps --format-version 1 --manifest-path "$root/Cargo.toml" |
    "$python" -c 'import json, sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "mcp-loom"))')"

# The npm platform package a Rust target goes into: name, os, cpu, libc. Keep in step with
# PACKAGES in packaging/npm/mcp-loom/bin/loom.js and the matrix in .github/workflows/release.yml.
case "$target" in
    x86_64-unknown-linux-gnu) npm_platform=linux-x64; npm_os=linux; npm_cpu=x64; npm_libc=glibc ;;
    aarch64-unknown-linux-gnu) npm_platform=linux-arm64; npm_os=linux; npm_cpu=arm64; npm_libc=glibc ;;
    x86_64-unknown-linux-musl) npm_platform=linux-x64-musl; npm_os=linux; npm_cpu=x64; npm_libc=musl ;;
    aarch64-apple-darwin) npm_platform=darwin-arm64; npm_os=darwin; npm_cpu=arm64; npm_libc="" ;;
    x86_64-apple-darwin) npm_platform=darwin-x64; npm_os=darwin; npm_cpu=x64; npm_libc="" ;;
    # loom is Unix-only (raw stdio descriptors, process groups, signals): no Windows target yet.
    *) echo "dist.sh: no package layout for target '$target' (supported: x86_64/aarch64-unknown-linux-gnu, x86_64-unknown-linux-musl, aarch64/x86_64-apple-darwin)" >&2; exit 2 ;;
esac
if [ -n "$manylinux" ] && { [ "$npm_libc" != glibc ] || ! [[ "$manylinux" =~ ^manylinux(2014|_2_[0-9]+)$ ]]; }; then
    echo "dist.sh: --manylinux takes a tag like manylinux_2_17 and a Linux glibc target (got '$manylinux' for $target)" >&2
    exit 2
fi

mkdir -p "$out" "$out/npm"
out="$(cd "$out" && pwd)"
stage="$(mktemp -d "${TMPDIR:-/tmp}/loom-dist.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
say() { printf 'dist.sh: %s\n' "$*" >&2; }

# --- tools -------------------------------------------------------------------------------------
venv="$tools/venv"
py="$venv/bin/python"
maturin="maturin==$MATURIN_VERSION"
[ -n "$manylinux" ] && maturin="maturin[zig]==$MATURIN_VERSION"
if ! [ -x "$py" ] || ! "$py" -m maturin --version 2>/dev/null | grep -qF " $MATURIN_VERSION" ||
    { [ -n "$manylinux" ] && ! "$py" -c 'import ziglang' 2>/dev/null; }; then
    say "installing $maturin into $venv"
    [ -x "$py" ] || "$python" -m venv "$venv"
    "$py" -m pip install --quiet --disable-pip-version-check "$maturin"
fi
mcpb="$tools/node/node_modules/.bin/mcpb"
if ! [ -x "$mcpb" ] || [ "$("$mcpb" --version 2>/dev/null)" != "$MCPB_VERSION" ]; then
    say "installing @anthropic-ai/mcpb $MCPB_VERSION into $tools/node"
    mkdir -p "$tools/node"
    npm install --silent --no-audit --no-fund --prefix "$tools/node" "@anthropic-ai/mcpb@$MCPB_VERSION" >&2
fi

# --- the wheel (it builds the binary) ----------------------------------------------------------
say "building mcp-loom $version for $target ($profile profile) into $out"
rm -f "$out"/mcp_loom-"$version"-*.whl
# `--profile release` builds Cargo's `dist` profile: release for size with fat LTO (Cargo.toml
# says why).
cargo_profile="$profile"
[ "$profile" = release ] && cargo_profile=dist
target_args=()
[ "$target" != "$host" ] && target_args=(--target "$target")
[ -n "$manylinux" ] && target_args+=(--zig --compatibility "$manylinux")
# The venv first on PATH: with --zig maturin runs `python -m ziglang` from there.
PATH="$(dirname "$py"):$PATH" CARGO_TARGET_DIR="$target_dir" "$py" -m maturin build --profile "$cargo_profile" --out "$out" \
    --manifest-path "$root/Cargo.toml" ${target_args[@]+"${target_args[@]}"} >&2
# Every other artifact carries the very bytes the wheel does (maturin stripped them): one build,
# five wrappers, whatever target directory layout the build used.
wheel="$(ls "$out"/mcp_loom-"$version"-*.whl)"
binary="$stage/loom"
"$python" - "$wheel" "$binary" <<'PY'
import sys, zipfile
wheel, destination = sys.argv[1:]
with zipfile.ZipFile(wheel) as archive:
    names = [n for n in archive.namelist() if n.split("/")[-2:-1] == ["scripts"] and n.split("/")[-1] == "loom"]
    if len(names) != 1:
        sys.exit(f"dist.sh: {wheel} holds {names or 'no'} loom binary")
    with open(destination, "wb") as out:
        out.write(archive.read(names[0]))
PY
chmod +x "$binary"
if [ "$target" = "$host" ] && ! "$binary" --version >/dev/null 2>&1; then
    echo "dist.sh: the built binary does not run: $binary" >&2
    exit 1
fi

# --- npm: the platform package and the launcher ------------------------------------------------
platform_dir="$stage/npm-platform"
mkdir -p "$platform_dir/bin"
cp "$binary" "$platform_dir/bin/loom"
cp LICENSE "$platform_dir/"
NAME="@mcp-loom/$npm_platform" VERSION="$version" OS="$npm_os" CPU="$npm_cpu" LIBC="$npm_libc" \
    node -e '
    const e = process.env;
    const manifest = {
      name: e.NAME,
      version: e.VERSION,
      description: `loom (mcp-loom) built for ${e.OS}-${e.CPU}${e.LIBC === "musl" ? " (musl)" : ""}; installed by the mcp-loom launcher`,
      license: "Apache-2.0",
      repository: { type: "git", url: "git+https://github.com/mcp-loom/mcp-loom.git" },
      os: [e.OS],
      cpu: [e.CPU],
      ...(e.LIBC ? { libc: [e.LIBC] } : {}),
      files: ["bin/", "LICENSE"],
      preferUnplugged: true,
    };
    require("fs").writeFileSync(process.argv[1], JSON.stringify(manifest, null, 2) + "\n");
    ' "$platform_dir/package.json"
printf '# @mcp-loom/%s\n\nThe `loom` binary of [mcp-loom](https://www.npmjs.com/package/mcp-loom) for %s. Install `mcp-loom`, not this.\n' \
    "$npm_platform" "$npm_platform" >"$platform_dir/README.md"

launcher_dir="$stage/npm-launcher"
cp -R packaging/npm/mcp-loom "$launcher_dir"
cp LICENSE "$launcher_dir/"
VERSION="$version" node -e '
    const fs = require("fs");
    const file = process.argv[1];
    const manifest = JSON.parse(fs.readFileSync(file, "utf8"));
    manifest.version = process.env.VERSION;
    for (const name of Object.keys(manifest.optionalDependencies)) {
      manifest.optionalDependencies[name] = process.env.VERSION;
    }
    manifest.files.push("LICENSE");
    fs.writeFileSync(file, JSON.stringify(manifest, null, 2) + "\n");
    ' "$launcher_dir/package.json"
chmod +x "$launcher_dir/bin/loom.js"
rm -f "$out/npm/mcp-loom-$version.tgz" "$out/npm/mcp-loom-$npm_platform-$version.tgz"
(cd "$platform_dir" && npm pack --silent --pack-destination "$out/npm" >/dev/null)
(cd "$launcher_dir" && npm pack --silent --pack-destination "$out/npm" >/dev/null)

# --- the MCP Bundle ----------------------------------------------------------------------------
bundle_dir="$stage/mcpb"
mkdir -p "$bundle_dir/server"
cp "$binary" "$bundle_dir/server/loom"
cp LICENSE README.md "$bundle_dir/"
VERSION="$version" OS="$npm_os" PLATFORM="$npm_platform" node -e '
    const fs = require("fs");
    const [template, file] = process.argv.slice(1);
    const manifest = JSON.parse(fs.readFileSync(template, "utf8"));
    manifest.version = process.env.VERSION;
    manifest.compatibility.platforms = [process.env.OS];
    // MCPB has no architecture field: a Mac bundle says which Macs it is for.
    const mac = { "darwin-arm64": "Apple silicon", "darwin-x64": "Intel" }[process.env.PLATFORM];
    if (mac) manifest.display_name = `${manifest.display_name} (${mac} Macs)`;
    fs.writeFileSync(file, JSON.stringify(manifest, null, 2) + "\n");
    ' packaging/mcpb/manifest.json "$bundle_dir/manifest.json"
"$mcpb" validate "$bundle_dir/manifest.json" >&2
rm -f "$out/loom-$version.mcpb"
"$mcpb" pack "$bundle_dir" "$out/loom-$version.mcpb" >&2

# --- the tarball and its checksum --------------------------------------------------------------
archive="loom-$version-$target"
mkdir -p "$stage/$archive"
cp "$binary" "$stage/$archive/loom"
cp README.md LICENSE "$stage/$archive/"
# No macOS extended attributes in the archive (GNU tar warns about them).
COPYFILE_DISABLE=1 tar -C "$stage" -czf "$out/$archive.tar.gz" "$archive"
if command -v sha256sum >/dev/null; then
    (cd "$out" && sha256sum "$archive.tar.gz" >"$archive.tar.gz.sha256")
else
    (cd "$out" && shasum -a 256 "$archive.tar.gz" >"$archive.tar.gz.sha256")
fi

say "done:"
(cd "$out" && ls -l ./*.whl ./*.mcpb ./*.tar.gz ./*.sha256 npm/*.tgz) >&2
