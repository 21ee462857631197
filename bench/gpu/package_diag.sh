#!/usr/bin/env bash
# The CUDA override library alone (no forge build, no search): builds
# libforge.so against this machine's torch, one nvcc-compiled group_norm
# kernel, and runs bench/gpu/package_diag.py's cases. About two minutes.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/gpu/env.sh
pkg=/tmp/pkgdiag; mkdir -p $pkg/kernels
t0=$(date +%s)
rm -rf /tmp/rt
(cmake -S runtime/worker -B /tmp/rt -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
   -DCMAKE_PREFIX_PATH="$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')" &&
 cmake --build /tmp/rt --target forge_package) > ${OUT:-/tmp}/rt.log 2>&1 || { tail -30 ${OUT:-/tmp}/rt.log; exit 1; }
echo "libforge.so built in $(( $(date +%s) - t0 )) s"
cp /tmp/rt/libforge.so $pkg/
(printf '#define FORGE_DTYPES 8\n#define FORGE_P_BLOCK 128\n#define FORGE_P_CHUNK 32768\n'; cat targets/group_norm/cuda_split_group.cu) > /tmp/gn.cu
nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC -cudart shared -gencode=arch=compute_90a,code=sm_90a \
  -Iruntime/abi -o $pkg/kernels/gn.so /tmp/gn.cu || exit 1
bash bench/gpu/toolchain_probe.sh
python3 bench/gpu/package_diag.py $pkg  # FORGE_DIAG_TRACE=1: per-call trace lines
# The first case's native stack, libforge.so's frames named by addr2line.
FORGE_PACKAGE_TRACE=1 python3 -c "
import torch, torch.nn.functional as F
torch.ops.load_library('$pkg/libforge.so')
x = torch.randn(1, 128, 512, 512, device='cuda', dtype=torch.bfloat16)
F.group_norm(x, 32, torch.ones(128, device='cuda', dtype=torch.bfloat16), None)" 2>&1 | grep "trace:" | tail -40 > /tmp/stack.txt
cat /tmp/stack.txt
grep -o 'libforge.so+0x[0-9a-f]*' /tmp/stack.txt | sed 's/.*+//' | xargs -r addr2line -f -C -i -e $pkg/libforge.so 2>&1 | head -60
python3 -c "import torch; print('torch', torch.__version__, torch.compiled_with_cxx11_abi())"
if command -v gdb > /dev/null; then  # the native stack of the first case
  FORGE_PACKAGE_TRACE=1 timeout 60 gdb -q -batch -ex run -ex bt --args python3 -c "
import torch, torch.nn.functional as F
torch.ops.load_library('$pkg/libforge.so')
x = torch.randn(1, 128, 512, 512, device='cuda', dtype=torch.bfloat16)
F.group_norm(x, 32, torch.ones(128, device='cuda', dtype=torch.bfloat16), None)" 2>&1 | grep -A 25 SIGSEGV | head -30
else echo "no gdb"; fi
