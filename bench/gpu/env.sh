# Sourced by the GPU scripts: libgit2 and cpp-httplib (with the headers its
# flags name: openssl, zlib, brotli) from carried Debian packages (.debs/,
# unpacked off /), `python` for the model commands, the runtime cache.
if ! pkg-config --exists libgit2 cpp-httplib 2>/dev/null; then
  mkdir -p /tmp/git2
  for f in .debs/*.deb; do dpkg -x "$f" /tmp/git2; done
  lib=/tmp/git2/usr/lib/x86_64-linux-gnu
  # Only static linking needs its private requirements, whose .pc files are absent there.
  sed -i '/^Requires.private/d' $lib/pkgconfig/*.pc
  export PKG_CONFIG_PATH=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=/tmp/git2
  export LDFLAGS="-Wl,-rpath-link,$lib" LD_LIBRARY_PATH=$lib:${LD_LIBRARY_PATH:-}
  export CPATH=/tmp/git2/usr/include/x86_64-linux-gnu  # openssl's multiarch configuration.h
fi
# The model commands say `python`; the machine has python3 (a venv's: a symlink
# to it would lose the venv, so a wrapper).
mkdir -p /tmp/pybin && printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" > /tmp/pybin/python
chmod +x /tmp/pybin/python
export PATH=/tmp/pybin:$PATH FORGE_CACHE_DIR=/tmp/forge-cache
