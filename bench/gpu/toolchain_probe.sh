#!/usr/bin/env bash
# Which C++ runtime a shared library built on this machine carries: prints the
# compiler, where its libstdc++ comes from, and whether libforge.so (built by
# package_diag.sh into /tmp/pkgdiag) defines libstdc++ code itself.
cd "$(dirname "$0")/../.."
for c in "${CXX:-}" c++ g++ /usr/bin/g++ /usr/bin/g++-13 /usr/bin/g++-14 /opt/gcc/bin/g++; do
  [ -n "$c" ] && command -v "$c" > /dev/null && echo "$c -> $(readlink -f "$(command -v "$c")") $("$c" -dumpfullversion)"
done
echo "CXX=${CXX:-} CC=${CC:-}"
g++ -print-file-name=libstdc++.so; g++ -print-file-name=libstdc++.a; g++ -print-file-name=libstdc++_nonshared.a
f=$(g++ -print-file-name=libstdc++.so); file -L "$f"; head -c 400 "$f" | strings | head -5
g++ -dumpspecs | grep -n -i "static\|stdc" | head
ls /opt/gcc/lib64 2>/dev/null | head -20
python3 -c "import torch,os; print(torch.__version__)"; grep libstdc /proc/self/maps | head -2
if [ -f /tmp/pkgdiag/libforge.so ]; then
  readelf -d /tmp/pkgdiag/libforge.so | grep -i "needed\|rpath\|runpath"
  nm -DC --defined-only /tmp/pkgdiag/libforge.so | grep -c "std::"
  nm -C /tmp/pkgdiag/libforge.so | grep -c "std::locale::id"
fi
