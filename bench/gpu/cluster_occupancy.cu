// How many thread-block clusters of a shape an H200 runs at once
// (cudaOccupancyMaxActiveClusters), for the one-read group_norm by clusters (stream_group):
// a cluster per slice works only as fast as enough clusters are resident.
//   nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a bench/gpu/cluster_occupancy.cu -o /tmp/cluster_occupancy
//   /tmp/cluster_occupancy        # on the GPU machine; prints a table
#include <cstdio>
#include <cuda_runtime.h>

__global__ void probe_kernel(float* out) {
  extern __shared__ float smem[];
  smem[threadIdx.x] = 0.0f;
  if (out) out[blockIdx.x] = smem[threadIdx.x];
}

int main() {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return std::printf("no CUDA device\n"), 1;
  cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
  std::printf("%s, %d SMs\n%8s %6s %8s %16s %14s\n", prop.name, prop.multiProcessorCount, "cluster", "block",
              "smem KB", "active clusters", "CTAs resident");
  for (int cluster : {16, 8, 4})
    for (int block : {256, 512, 1024})
      for (int smem_kb : {0, 64, 112, 200}) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(cluster * 64);
        cfg.blockDim = dim3(block);
        cfg.dynamicSmemBytes = static_cast<size_t>(smem_kb) * 1024;
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = cluster, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
        cfg.attrs = attr, cfg.numAttrs = 1;
        int n = -1;
        const cudaError_t e = cudaOccupancyMaxActiveClusters(&n, probe_kernel, &cfg);
        if (e != cudaSuccess) std::printf("%8d %6d %8d %16s\n", cluster, block, smem_kb, cudaGetErrorString(e));
        else std::printf("%8d %6d %8d %16d %14d\n", cluster, block, smem_kb, n, n * cluster);
      }
  return 0;
}
