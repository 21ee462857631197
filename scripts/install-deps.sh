#!/usr/bin/env bash
# Installs what forge builds against, from Debian's packages, when missing.
# Idempotent: checks with dpkg first, so a machine that has them does nothing.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config python3-venv
      libyaml-cpp-dev nlohmann-json3-dev libgit2-dev libcurl4-openssl-dev libssl-dev
      doctest-dev libcpp-httplib-dev clang-format)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# The GUI's browser test (gui/test/e2e.mjs): Node for playwright-core, and a
# headless Chromium from Debian. By command, not package: a NodeSource nodejs
# carries its own npm, which Debian's npm package would conflict with.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${missing[@]}" >/dev/null
