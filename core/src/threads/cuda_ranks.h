#pragma once
// The CUDA side of the threads backend's device buffers (device_ranks.h):
// only cuda_ranks.cpp and cuda_ranks_local.cpp include it, and only builds
// with CUDA compile them.
#include <cuda_runtime_api.h>

#include <vector>

#include "threads/device_ranks.h"

namespace dtw::threads {

// Where a pointer's memory is: device (or managed) memory of device `id`, or
// the host (pageable or pinned; also a pointer the runtime does not know).
struct Where {
  bool device = false;
  int id = -1;
};
Where where(const void* p);

// Makes `device` the thread's current one for a scope (a rank's copy runs on
// its own device whatever the thread's was).
class OnDevice {
 public:
  explicit OnDevice(int device);
  ~OnDevice();
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

 private:
  int previous_ = 0;
};

// Queues a copy of `bytes` on `stream`: a peer copy between two devices, a
// copy the runtime classifies (cudaMemcpyDefault) otherwise.
void copy_bytes(void* dst, Where to, const void* src, Where from, std::int64_t bytes,
                cudaStream_t stream);

class CudaRanks final : public DeviceRanks {
 public:
  CudaRanks(int world_size, int devices);
  int device_of(int rank) const override { return rank % devices_; }
  Exec open_rank(int rank, std::shared_ptr<MemoryLedger> ledger) override;
  void close_rank(int rank) noexcept override;
  bool on_device(const void* p) const override;
  std::shared_ptr<void> ready_marker(const Exec& sender) override;
  std::string transfer(const Op& send, const Op& recv) noexcept override;
  void copy_local(const Exec& exec, const std::string& who, Buffer dst, ConstBuffer src) override;
  void divide_local(const Exec& exec, const std::string& who, Buffer data, int divisor) override;
  void reduce_local(const Exec& exec, const std::string& who, Buffer inout, ConstBuffer in,
                    ReduceOp op) override;
  void to_host(const Exec& exec, void* host, const void* p, std::int64_t bytes) override;
  void from_host(const Exec& exec, void* p, const void* host, std::int64_t bytes) override;

 private:
  int devices_;
  std::vector<cudaStream_t> streams_;  // [rank]: written and read by that rank's thread only
};

}  // namespace dtw::threads
