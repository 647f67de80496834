// dtw_gpu_info: what a GPU run ran on, for its record -- the CUDA runtime this
// program carries, the driver's CUDA version, the NCCL library it loaded, and
// every device (name, compute capability, SMs, memory, L2, clocks) with the
// peer access between them. Always exits 0; without a device it says so.
#include <cuda_runtime_api.h>

#include <cstdio>

#include "dtw/config.h"
#if DTW_HAVE_NCCL
#include <nccl.h>
#endif

namespace {

void print_version(const char* what, int v) {
  std::printf("%s: %d.%d\n", what, v / 1000, (v % 1000) / 10);
}

}  // namespace

int main() {
  int runtime = 0, driver = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) print_version("cuda runtime", runtime);
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) print_version("cuda driver api", driver);
  else std::printf("cuda driver api: none (no driver loaded)\n");
#if DTW_HAVE_NCCL
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess)
    std::printf("nccl: %d.%d.%d (built against %d.%d.%d)\n", nccl / 10000, (nccl % 10000) / 100, nccl % 100,
                NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
#else
  std::printf("nccl: not in this build\n");
#endif
  int devices = 0;
  const cudaError_t rc = cudaGetDeviceCount(&devices);
  if (rc != cudaSuccess || devices == 0) {
    std::printf("devices: 0 (%s)\n", rc != cudaSuccess ? cudaGetErrorString(rc) : "cudaGetDeviceCount found 0");
    return 0;
  }
  std::printf("devices: %d\n", devices);
  for (int d = 0; d < devices; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) {
      std::printf("device %d: cudaGetDeviceProperties failed\n", d);
      continue;
    }
    int mem_clock_khz = 0, bus_bits = 0, sm_clock_khz = 0;
    cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, d);
    cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, d);
    cudaDeviceGetAttribute(&sm_clock_khz, cudaDevAttrClockRate, d);
    std::printf("device %d: %s, sm_%d%d, %d SMs, %.0f MiB, L2 %d KiB, SM clock %d MHz, "
                "memory %d MHz x %d bit\n",
                d, p.name, p.major, p.minor, p.multiProcessorCount,
                static_cast<double>(p.totalGlobalMem) / (1 << 20), p.l2CacheSize / 1024, sm_clock_khz / 1000,
                mem_clock_khz / 1000, bus_bits);
  }
  for (int a = 0; a < devices; ++a)
    for (int b = 0; b < devices; ++b) {
      int can = 0;
      if (a != b && cudaDeviceCanAccessPeer(&can, a, b) == cudaSuccess)
        std::printf("peer access %d -> %d: %s\n", a, b, can ? "yes" : "no");
    }
  return 0;
}
