#!/usr/bin/env bash
# Local stand-ins for the two public base images the Containerfile starts from, for machines that
# cannot reach an image registry. Each is built only when no image of that name exists, and tagged
# with the fully qualified public name, so `podman build` of the Containerfile finds it locally:
# - docker.io/library/debian:bookworm-slim: `mmdebstrap --variant=minbase bookworm` imported with
#   PATH and CMD set (Debian's own packages, as the real image);
# - docker.io/denoland/deno:bin-<.deno-version>: FROM scratch with the `deno` binary at /deno, taken
#   from the npm package `deno@<version>` (the binary the real image carries).
# The Containerfile itself stays the one users build; nothing here is part of the image.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
version="$(cat "$repo/.deno-version")"
debian="docker.io/library/debian:bookworm-slim"
deno_image="docker.io/denoland/deno:bin-${version}"
work="$(mktemp -d "${TMPDIR:-/tmp}/es-base-images.XXXXXX")"
trap 'rm -rf "$work"' EXIT

if ! podman image exists "$debian"; then
  mmdebstrap --variant=minbase --quiet bookworm "$work/rootfs.tar"
  podman import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    "$work/rootfs.tar" "$debian" >/dev/null
  rm -f "$work/rootfs.tar"
fi

if ! podman image exists "$deno_image"; then
  mkdir -p "$work/npm" "$work/context"
  npm install --silent --no-audit --no-fund --prefix "$work/npm" "deno@${version}" >/dev/null
  binary=""
  for candidate in "$work/npm/node_modules/deno/deno" "$work"/npm/node_modules/@deno/linux-*/deno; do
    if [ -f "$candidate" ] && "$candidate" --version | grep -q "^deno ${version} "; then
      binary="$candidate"
      break
    fi
  done
  if [ -z "$binary" ]; then
    echo "base_images.sh: no deno ${version} binary in the npm package deno@${version}" >&2
    exit 1
  fi
  cp "$binary" "$work/context/deno"
  chmod 755 "$work/context/deno"
  printf 'FROM scratch\nCOPY deno /deno\n' >"$work/context/Containerfile"
  podman build --quiet -t "$deno_image" "$work/context" >/dev/null
fi
