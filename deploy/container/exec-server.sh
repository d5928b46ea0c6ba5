#!/bin/sh
# `exec-server` inside the image: the same CLI as on a workstation (`exec-server --help`,
# `exec-server run`, `exec-server mcp`), under scoped Deno permissions instead of --allow-all
# (docs/guide/permissions.md; docs/guide/container.md says what each scope is for):
# - run: the shells Codex starts commands with, bubblewrap for --sandbox, and Deno itself (the
#   Landlock layer's launcher, where user namespaces are denied);
# - read: the workspace, /tmp, the token's directory, bubblewrap and the shell, and the server's
#   own modules (`exec-server mcp` loads its modules from there when it starts);
# - write: the workspace and /tmp;
# - net: the listener (any port) and clients on the container's loopback (the health check,
#   `exec-server run`); http/request to anything else is a typed permission error.
# Modules come from the image's cache only (--cached-only): it starts without a network.
exec /usr/local/bin/deno run --cached-only --no-prompt \
  --allow-run=/bin/bash,/bin/sh,/usr/bin/bwrap,/usr/local/bin/deno \
  --allow-read=/workspace,/tmp,/run/secrets/exec-server,/usr/bin/bwrap,/bin/sh,/opt/exec-server \
  --allow-write=/workspace,/tmp \
  --allow-net=0.0.0.0,127.0.0.1,localhost \
  --allow-env --allow-sys --allow-ffi \
  /opt/exec-server/main.ts "$@"
