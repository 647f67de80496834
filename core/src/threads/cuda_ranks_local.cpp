// Comm's local steps and the staging copies of the threads backend with
// device buffers (device_ranks.h): on the rank's stream, waited for, so the
// caller may read the result or free the source once the call returns -- as
// the nccl backend does, and with its rule for host memory: copy_local and
// divide_local need device memory (InvalidArgument naming the rank, the call
// and the pointer), reduce_local takes host memory where the nccl backend does.
#include <vector>

#include "dtw/cuda_check.h"
#include "dtw/kernels/cuda_reduce.h"
#include "dtw/kernels/reduce.h"
#include "threads/cuda_ranks.h"

namespace dtw::threads {
namespace {

cudaStream_t stream_of(const Exec& exec) {
  return static_cast<cudaStream_t>(exec.stream());
}

Where device_memory(const std::string& who, const char* call, const char* name, const void* p,
                    std::int64_t count, DataType type) {
  const Where w = where(p);
  DTW_CHECK_ARG(w.device, who << ": " << call << ": " << name << " (" << p << ", " << count << " "
                              << name_of(type)
                              << ") is host memory, but the threads backend with device buffers "
                                 "runs this on the rank's GPU (make the rank's buffers on "
                                 "comm.exec(), or with cudaMalloc)");
  return w;
}

void sync(const Exec& exec) {
  DTW_CUDA_CHECK(cudaStreamSynchronize(stream_of(exec)));
}

}  // namespace

void CudaRanks::copy_local(const Exec& exec, const std::string& who, Buffer dst, ConstBuffer src) {
  const Where to = device_memory(who, "copy_local", "dst", dst.data, dst.count, dst.type);
  const Where from = device_memory(who, "copy_local", "src", src.data, src.count, src.type);
  const OnDevice on(exec.device());
  copy_bytes(dst.data, to, src.data, from, src.bytes(), stream_of(exec));
  sync(exec);
}

void CudaRanks::divide_local(const Exec& exec, const std::string& who, Buffer data, int divisor) {
  device_memory(who, "divide_local", "data", data.data, data.count, data.type);
  const OnDevice on(exec.device());
  kernels::device_divide(data, divisor, exec.stream());
  sync(exec);
}

void CudaRanks::reduce_local(const Exec& exec, const std::string& who, Buffer inout, ConstBuffer in,
                             ReduceOp op) {
  const Where out = where(inout.data), from = where(in.data);
  if (!out.device && !from.device) return kernels::reduce_into(inout, in, op);
  const OnDevice on(exec.device());
  if (!out.device) {
    // irecv_reduce into host memory with a device message: the host reduces.
    std::vector<std::byte> host(static_cast<std::size_t>(in.bytes()));
    copy_bytes(host.data(), {}, in.data, from, in.bytes(), stream_of(exec));
    sync(exec);
    return kernels::reduce_into(inout, ConstBuffer{host.data(), in.count, in.type}, op);
  }
  device_memory(who, "reduce_local", "in", in.data, in.count, in.type);
  DTW_CHECK_ARG(from.id == out.id, who << ": reduce_local: inout is on cuda:" << out.id
                                       << " but in on cuda:" << from.id);
  kernels::device_reduce_into(inout, in, op, exec.stream());
  sync(exec);
}

void CudaRanks::to_host(const Exec& exec, void* host, const void* p, std::int64_t bytes) {
  const OnDevice on(exec.device());
  copy_bytes(host, {}, p, where(p), bytes, stream_of(exec));
  sync(exec);
}

void CudaRanks::from_host(const Exec& exec, void* p, const void* host, std::int64_t bytes) {
  const OnDevice on(exec.device());
  copy_bytes(p, where(p), host, {}, bytes, stream_of(exec));
  sync(exec);
}

}  // namespace dtw::threads
