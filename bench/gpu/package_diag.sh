#!/usr/bin/env bash
# The CUDA override library alone (no forge build, no search): builds
# libforge.so against this machine's torch, one nvcc-compiled group_norm
# kernel, and runs bench/gpu/package_diag.py's cases (CUDA graphs, a second
# GPU, threads, reduce-overhead). About two minutes.
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
(printf '#define FORGE_DTYPES 8\n#define FORGE_P_BLOCK 128\n#define FORGE_P_CHUNK 32768\n'; python3 bench/templates/template_text.py targets/group_norm/cuda_split_group.cu) > /tmp/gn.cu
nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC -cudart shared -gencode=arch=compute_90a,code=sm_90a \
  -Iruntime/abi -o $pkg/kernels/gn.so /tmp/gn.cu || exit 1
bash bench/gpu/toolchain_probe.sh
python3 bench/gpu/package_diag.py $pkg  # FORGE_DIAG_TRACE=1: per-call trace lines
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.device_count(), 'GPUs')"
