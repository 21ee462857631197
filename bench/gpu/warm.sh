#!/usr/bin/env bash
# Runs a command from a copy of this tree at /tmp/forge-src, which lives as long
# as the device machine stays warm. Later calls of the same tree (.gpu-commit,
# written when .gpu-src was made) reuse it: the forge build in build-gpu is
# then up to date, and the source paths (part of the runtime's and the store's
# keys) stay the same, so the store in /tmp carries finished work over.
#   cd .gpu-src && bash bench/gpu/warm.sh bash bench/gpu/campaign.sh vae
set -u
src=/tmp/forge-src
here=$(cat .gpu-commit 2>/dev/null || echo unknown)
if [ "$here" = unknown ] || [ "$(cat "$src/.gpu-commit" 2>/dev/null)" != "$here" ]; then
  rm -rf "$src" && cp -a . "$src"
  echo "warm.sh: fresh copy of $here at $src"
else
  echo "warm.sh: reusing $src ($here)"
fi
cd "$src" && exec "$@"
