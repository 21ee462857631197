#!/usr/bin/env bash
# Which C++ runtime a shared library built on this machine carries: prints the
# compiler, where its libstdc++ comes from, and whether a libforge.so (the
# argument; default /tmp/pkgdiag/libforge.so from package_diag.sh) defines
# libstdc++ code itself.
cd "$(dirname "$0")/../.."
for c in "${CXX:-}" c++ g++ /usr/bin/g++ /usr/bin/g++-13 /usr/bin/g++-14 /opt/gcc/bin/g++; do
  [ -n "$c" ] && command -v "$c" > /dev/null && echo "$c -> $(readlink -f "$(command -v "$c")") $("$c" -dumpfullversion)"
done
echo "CXX=${CXX:-} CC=${CC:-}"
cxx=${CXX:-g++}; file "$(command -v "$cxx")"; head -c 600 "$(command -v "$cxx")" | strings | head -8
"$cxx" -print-file-name=libstdc++.so; "$cxx" -print-file-name=libstdc++.a; "$cxx" -print-file-name=libstdc++_nonshared.a
f=$("$cxx" -print-file-name=libstdc++.so); file -L "$f"; head -c 400 "$f" | strings | head -5
"$cxx" -dumpspecs | grep -n -i "static-libstdc\|nonshared" | head -3
ls /opt/gcc/lib /opt/gcc/lib64 2>/dev/null | grep -i "stdc\|:" | head -10
python3 -c "import torch,os; print(torch.__version__)"; grep libstdc /proc/self/maps | head -2
lib=${1:-/tmp/pkgdiag/libforge.so}
if [ -f "$lib" ]; then
  echo "$lib:"; readelf -d "$lib" | grep -i "needed" | grep -i "stdc\|gcc"
  echo "defined std:: symbols: $(nm -DC --defined-only "$lib" | grep -c "std::")"
fi
