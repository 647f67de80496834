#pragma once
// reduce_into on the GPU against a device-to-device copy of the same bytes:
// the measurement dtw_bench_gpu prints and `dtw bench collectives --backend
// nccl` adds to its report. Bandwidth counts bytes moved: the reduction reads
// two arrays and writes one (3n), the copy reads one and writes one (2n).
#include <cstdint>
#include <span>
#include <vector>

#include "dtw/types.h"

namespace dtw::bench {

/// One size: the median of several timed batches of each, on the current
/// device, over buffers filled with data (not zeros).
struct DeviceBandwidth {
  std::int64_t bytes = 0;     ///< bytes per array
  double reduce_seconds = 0;  ///< one device_reduce_into over `bytes`
  double copy_seconds = 0;    ///< one cudaMemcpyAsync device-to-device of `bytes`
  double reduce_gbps() const { return 3.0 * static_cast<double>(bytes) / reduce_seconds / 1e9; }
  double copy_gbps() const { return 2.0 * static_cast<double>(bytes) / copy_seconds / 1e9; }
  /// reduce_into's bandwidth as a fraction of the copy's.
  double ratio() const { return reduce_gbps() / copy_gbps(); }
};

/// Times device_reduce_into(`type`, `op`) and a device-to-device copy for each
/// of `sizes` (bytes, whole elements) on the current CUDA device, in arrays of
/// the largest size. Throws CudaError when a CUDA call fails (no device, say).
std::vector<DeviceBandwidth> measure_reduce_vs_copy(std::span<const std::int64_t> sizes, DataType type,
                                                    ReduceOp op);

}  // namespace dtw::bench
