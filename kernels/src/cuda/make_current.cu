// The device half of placed.cpp: a rank's kernels run on its Place's device.
// The current device is per host thread, and ranks that share a thread (fibers)
// or a process (threads on several GPUs) may want different ones, so every
// device call on a Place sets it; cudaSetDevice to the device already current
// costs a few hundred nanoseconds, small beside a kernel launch.
#include <cuda_runtime_api.h>

#include "../placed.h"
#include "dtw/errors.h"

namespace dtw::kernels::detail {

void make_current(const Place& at, const char* kernel) {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == at.device) return;
  const cudaError_t rc = cudaSetDevice(at.device);
  if (rc == cudaSuccess) return;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  (void)cudaGetLastError();  // reset the last error, so a later launch check does not report this one
  ::dtw::detail::raise<CudaError>(::dtw::detail::Message()
                                      << "kernels::" << kernel << " on " << at.describe()
                                      << ": cudaSetDevice(" << at.device
                                      << ") failed: " << cudaGetErrorName(rc) << " ("
                                      << cudaGetErrorString(rc) << "); this machine has "
                                      << devices << " CUDA device(s)",
                                  __FILE__, __LINE__);
}

}  // namespace dtw::kernels::detail
