#!/usr/bin/env bash
# Builds self-contained exec-server executables into dist/, one per target, plus dist/SHA256SUMS.
#
#   ./compile.sh                 all release targets (needs the Deno runtime download for each target)
#   TARGETS="x86_64-unknown-linux-gnu" ./compile.sh      only these targets
#   DENORT_BIN=/path/to/denort ./compile.sh              use a local runtime (offline); builds the host
#                                                        target only unless TARGETS names it explicitly
#
# The permission flags below are baked into every binary; the binary behaves like
# `deno run <flags> main.ts` with the same command-line arguments.
set -euo pipefail
cd "$(dirname "$0")"

PERMISSIONS=(--allow-run --allow-read --allow-write --allow-net --allow-env --allow-sys --allow-ffi)
# main.ts loads `exec-server mcp` through a specifier deno compile does not follow (see loadMcpCommand).
# The npm packages loaded on first use: see lib/server/session/lazy_packages.ts.
INCLUDES=(--include lib/cli/mcp_command.ts --include lib/server/session/lazy_packages.ts)
ALL_TARGETS="x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu x86_64-apple-darwin aarch64-apple-darwin x86_64-pc-windows-msvc"

if ! command -v deno >/dev/null 2>&1; then
  echo "compile.sh: deno is not installed; run: npm install -g deno@$(cat .deno-version)" >&2
  exit 1
fi

host_target() {
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) echo x86_64-unknown-linux-gnu ;;
    Linux-aarch64) echo aarch64-unknown-linux-gnu ;;
    Darwin-x86_64) echo x86_64-apple-darwin ;;
    Darwin-arm64) echo aarch64-apple-darwin ;;
    *) echo "compile.sh: unsupported host $(uname -s)-$(uname -m)" >&2; exit 1 ;;
  esac
}

if [ -n "${TARGETS:-}" ]; then
  targets="$TARGETS"
elif [ -n "${DENORT_BIN:-}" ]; then
  targets="$(host_target)"
else
  targets="$ALL_TARGETS"
fi
if [ -n "${DENORT_BIN:-}" ] && [ ! -x "$DENORT_BIN" ]; then
  echo "compile.sh: DENORT_BIN=$DENORT_BIN is not an executable file" >&2
  exit 1
fi

mkdir -p dist
built=()
for target in $targets; do
  suffix=""
  case "$target" in *windows*) suffix=".exe" ;; esac
  out="dist/exec-server-${target}${suffix}"
  echo "compile.sh: building $out"
  if ! errors="$(deno compile --quiet --no-prompt "${PERMISSIONS[@]}" "${INCLUDES[@]}" --target "$target" --output "$out" main.ts 2>&1)"; then
    if [ -z "${DENORT_BIN:-}" ] && grep -q 'denort-' <<<"$errors"; then
      echo "compile.sh: could not download the Deno runtime (denort) for $target; set DENORT_BIN=/path/to/denort to build without the download" >&2
    else
      printf '%s\n' "$errors" >&2
    fi
    exit 1
  fi
  if [ "$target" = "$(host_target 2>/dev/null || true)" ]; then
    # A binary built for this machine must answer like `deno run main.ts --version`.
    if ! "$out" --version 2>/dev/null | grep -q '^exec-server '; then
      rm -f "$out"
      echo "compile.sh: $out does not run exec-server (is DENORT_BIN a denort runtime, not the deno CLI?)" >&2
      exit 1
    fi
  fi
  built+=("$(basename "$out")")
done

(cd dist && sha256sum "${built[@]}" > SHA256SUMS)
echo "compile.sh: wrote dist/SHA256SUMS"
