// The threads backend's ranks on CUDA devices (device_ranks.h, whose comment
// holds the ordering protocol): streams, the sender's ready events and the
// receiver's copies. Compiled only where CUDA was found; the local steps are
// in cuda_ranks_local.cpp.
#include <cstring>
#include <vector>

#include "dtw/cuda_check.h"
#include "dtw/kernels/cuda_reduce.h"
#include "dtw/kernels/reduce.h"
#include "threads/cuda_ranks.h"
#include "threads/threads_world.h"

namespace dtw::threads {

Where where(const void* p) {
  cudaPointerAttributes attr{};
  if (p == nullptr || cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();  // clear it, so the next CUDA call does not report it
    return {};
  }
  if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged)
    return {true, attr.device};
  return {};
}

OnDevice::OnDevice(int device) {
  DTW_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) DTW_CUDA_CHECK(cudaSetDevice(device));
}

OnDevice::~OnDevice() {
  cudaSetDevice(previous_);
}

void copy_bytes(void* dst, Where to, const void* src, Where from, std::int64_t bytes,
                cudaStream_t stream) {
  const auto n = static_cast<std::size_t>(bytes);
  if (to.device && from.device && to.id != from.id)
    DTW_CUDA_CHECK(cudaMemcpyPeerAsync(dst, to.id, src, from.id, n, stream));
  else DTW_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, stream));
}

namespace {

cudaStream_t stream_of(const Op& op) {
  return static_cast<cudaStream_t>(op.stream);
}
cudaEvent_t event_of(const std::shared_ptr<void>& ready) {
  return static_cast<cudaEvent_t>(ready.get());
}

// Stream-ordered memory from the device's default pool is reachable from
// another GPU only once the pool grants it access (peer access does not cover
// pools): the same step as the nccl backend's, for copies between the GPUs
// of ranks that do not share one.
void share_pool_with_peers(int device, int devices) {
  cudaMemPool_t pool = nullptr;
  DTW_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  for (int peer = 0; peer < devices; ++peer) {
    int can = 0;
    if (peer == device) continue;
    DTW_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, peer, device));
    if (!can) continue;  // cudaMemcpyPeerAsync then goes through the host
    cudaMemAccessDesc access{};
    access.location.type = cudaMemLocationTypeDevice;
    access.location.id = peer;
    access.flags = cudaMemAccessFlagsProtReadWrite;
    DTW_CUDA_CHECK(cudaMemPoolSetAccess(pool, &access, 1));
  }
}

// Device scratch on a stream, freed (stream-ordered) however the copy ends.
struct Scratch {
  void* p = nullptr;
  cudaStream_t stream = nullptr;
  Scratch(std::int64_t bytes, cudaStream_t s) : stream(s) {
    DTW_CUDA_CHECK(cudaMallocAsync(&p, static_cast<std::size_t>(bytes), stream));
  }
  ~Scratch() { cudaFreeAsync(p, stream); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

// Step 2 of the protocol, on the receiver's thread: the receiver's stream
// waits for the sender's event, then copies or reduces, then is waited for.
void move(const Op& send, const Op& recv) {
  const std::int64_t bytes = send.count * static_cast<std::int64_t>(size_of(send.type));
  const Where from = where(send.src), to = where(recv.dst);
  const Buffer out{recv.dst, send.count, send.type};
  if (!from.device && !to.device) {
    // Host to host (the runtime's own messages): the sender's stream may still
    // hold a copy into its buffer, so the host waits for the event first.
    if (send.ready) DTW_CUDA_CHECK(cudaEventSynchronize(event_of(send.ready)));
    if (recv.reduce)
      kernels::reduce_into(out, ConstBuffer{send.src, send.count, send.type}, recv.reduce_op);
    else std::memcpy(recv.dst, send.src, static_cast<std::size_t>(bytes));
    return;
  }
  const OnDevice on(recv.device);
  const cudaStream_t stream = stream_of(recv);
  if (send.ready) DTW_CUDA_CHECK(cudaStreamWaitEvent(stream, event_of(send.ready), 0));
  if (!recv.reduce) {
    copy_bytes(recv.dst, to, send.src, from, bytes, stream);
    DTW_CUDA_CHECK(cudaStreamSynchronize(stream));
    return;
  }
  if (!to.device) {  // host inout, device message: reduce on the host
    std::vector<std::byte> host(static_cast<std::size_t>(bytes));
    copy_bytes(host.data(), {}, send.src, from, bytes, stream);
    DTW_CUDA_CHECK(cudaStreamSynchronize(stream));
    kernels::reduce_into(out, ConstBuffer{host.data(), send.count, send.type}, recv.reduce_op);
    return;
  }
  if (from.device && from.id == to.id) {
    // One GPU: the kernel reads the sender's buffer directly, one pass, as
    // the host backend's fused recv_reduce does.
    kernels::device_reduce_into(out, ConstBuffer{send.src, send.count, send.type}, recv.reduce_op,
                                stream);
  } else {
    const Scratch scratch(bytes, stream);
    copy_bytes(scratch.p, to, send.src, from, bytes, stream);
    kernels::device_reduce_into(out, ConstBuffer{scratch.p, send.count, send.type}, recv.reduce_op,
                                stream);
  }
  DTW_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace

CudaRanks::CudaRanks(int world_size, int devices)
    : devices_(devices), streams_(static_cast<std::size_t>(world_size), nullptr) {}

Exec CudaRanks::open_rank(int rank, std::shared_ptr<MemoryLedger> ledger) {
  const int device = device_of(rank);
  // The rest of the rank's CUDA calls run on this thread: make the device its own.
  DTW_CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t stream = nullptr;
  // Non-blocking: the rank's work never waits for the legacy default stream.
  DTW_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  streams_[static_cast<std::size_t>(rank)] = stream;
  if (devices_ > 1) share_pool_with_peers(device, devices_);
  return Exec::cuda(device, stream).with_ledger(std::move(ledger));
}

void CudaRanks::close_rank(int rank) noexcept {
  cudaStream_t& stream = streams_[static_cast<std::size_t>(rank)];
  if (stream == nullptr) return;
  cudaStreamSynchronize(stream);  // the stream-ordered frees of the rank's Arrays
  cudaStreamDestroy(stream);
  stream = nullptr;
}

bool CudaRanks::on_device(const void* p) const {
  return where(p).device;
}

std::shared_ptr<void> CudaRanks::ready_marker(const Exec& sender) {
  const OnDevice on(sender.device());  // an event is recorded on a stream of its own device
  cudaEvent_t event = nullptr;
  DTW_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  std::shared_ptr<void> handle(event,
                               [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
  DTW_CUDA_CHECK(cudaEventRecord(event, static_cast<cudaStream_t>(sender.stream())));
  return handle;
}

std::string CudaRanks::transfer(const Op& send, const Op& recv) noexcept {
  try {
    move(send, recv);
    return "";
  } catch (const std::exception& e) {
    return "rank " + std::to_string(recv.owner) + ": " + recv.call + " from rank " +
           std::to_string(send.owner) + ": the copy on the GPU failed: " + e.what();
  }
}

std::shared_ptr<DeviceRanks> make_device_ranks(int world_size) {
  int devices = 0;
  const cudaError_t rc = cudaGetDeviceCount(&devices);
  if (rc != cudaSuccess) cudaGetLastError();
  DTW_CHECK(rc == cudaSuccess && devices > 0, CudaError,
            "launch: device 'cuda' (threads backend, world of "
                << world_size << "): no CUDA device ("
                << (rc != cudaSuccess ? cudaGetErrorString(rc) : "cudaGetDeviceCount found 0")
                << "): run where a GPU is, or leave LaunchOptions::device empty for host ranks");
  return std::make_shared<CudaRanks>(world_size, devices);
}

}  // namespace dtw::threads
