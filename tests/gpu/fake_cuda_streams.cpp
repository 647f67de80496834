// A fake CUDA runtime whose streams are lazy: work queued on a stream runs
// only when something waits for it (cudaStreamSynchronize, an event
// synchronised or waited for by another stream, the stream's destruction),
// and then in order. So work that is not ordered correctly runs in the wrong
// order every time, not on some runs: a copy that does not wait for the
// sender's event reads the sender's buffer before the "kernels" queued ahead
// of it, and a receive that returns before its stream finished leaves the
// buffer unwritten. As in nccl_protocol_test.cpp, the test program defines
// the runtime's functions, so dtw_core's calls bind to these (libcudart stays
// linked, unused); "device" memory is host memory the fake cudaMalloc handed
// out. Kernel launches are not faked: the tests avoid the paths that launch.
#include "fake_cuda_streams.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

namespace fake_cuda {
namespace {

struct Stream {
  int device = 0;
  std::deque<std::function<void()>> pending;
  std::int64_t queued = 0, done = 0;  // operations queued and run so far
};
struct Event {
  Stream* stream = nullptr;
  std::int64_t target = 0;  // the stream's queued count when recorded
};
struct Allocation {
  std::size_t bytes;
  int device;
};

std::recursive_mutex g_mu;
std::map<std::uintptr_t, Allocation> g_device;
std::deque<std::unique_ptr<Stream>> g_streams;  // never freed: events may name a destroyed one
Counters g_counters;
int g_devices = 1;
thread_local int t_device = 0;

// Runs `stream`'s operations until `target` of them ran (an operation may
// run another stream's: a wait on an event).
void run_until(Stream* stream, std::int64_t target) {
  while (stream->done < target && !stream->pending.empty()) {
    std::function<void()> op = std::move(stream->pending.front());
    stream->pending.pop_front();
    ++stream->done;
    op();
  }
}

void enqueue(cudaStream_t s, std::function<void()> op) {
  if (s == nullptr) return op();  // the legacy stream: at once (nothing here uses it lazily)
  auto* stream = reinterpret_cast<Stream*>(s);
  stream->pending.push_back(std::move(op));
  ++stream->queued;
}

const Allocation* find(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  auto it = g_device.upper_bound(a);
  if (it == g_device.begin()) return nullptr;
  --it;
  return a < it->first + std::max<std::size_t>(it->second.bytes, 1) ? &it->second : nullptr;
}

}  // namespace

void reset(int devices) {
  std::lock_guard lock(g_mu);
  g_devices = devices;
  g_counters = {};
}
Counters counters() {
  std::lock_guard lock(g_mu);
  return g_counters;
}
void queue_write(void* stream, void* dst, std::vector<float> values) {
  std::lock_guard lock(g_mu);
  enqueue(static_cast<cudaStream_t>(stream),
          [dst, v = std::move(values)] { std::memcpy(dst, v.data(), v.size() * sizeof(float)); });
}
bool is_device(const void* p) {
  std::lock_guard lock(g_mu);
  return find(p) != nullptr;
}

}  // namespace fake_cuda

using namespace fake_cuda;

extern "C" {
cudaError_t cudaGetDeviceCount(int* count) {
  *count = g_devices;
  return g_devices > 0 ? cudaSuccess : cudaErrorNoDevice;
}
cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= g_devices) return cudaErrorInvalidDevice;
  t_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = t_device;
  return cudaSuccess;
}
cudaError_t cudaGetLastError() {
  return cudaSuccess;
}
const char* cudaGetErrorName(cudaError_t) {
  return "fakeCudaError";
}
const char* cudaGetErrorString(cudaError_t rc) {
  return rc == cudaErrorNoDevice ? "no CUDA-capable device is detected (fake)" : "fake CUDA error";
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  std::lock_guard lock(g_mu);
  g_streams.push_back(std::make_unique<Stream>());
  g_streams.back()->device = t_device;
  *stream = reinterpret_cast<cudaStream_t>(g_streams.back().get());
  ++g_counters.streams;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  std::lock_guard lock(g_mu);
  auto* stream = reinterpret_cast<Stream*>(s);
  run_until(stream, stream->queued);  // its work still completes
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  std::lock_guard lock(g_mu);
  if (s) run_until(reinterpret_cast<Stream*>(s), reinterpret_cast<Stream*>(s)->queued);
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  *event = reinterpret_cast<cudaEvent_t>(new Event);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete reinterpret_cast<Event*>(event);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  std::lock_guard lock(g_mu);
  auto* event = reinterpret_cast<Event*>(e);
  event->stream = reinterpret_cast<Stream*>(s);
  event->target = event->stream ? event->stream->queued : 0;
  ++g_counters.events_recorded;
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  std::lock_guard lock(g_mu);
  auto* event = reinterpret_cast<Event*>(e);
  if (event->stream) run_until(event->stream, event->target);
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
  std::lock_guard lock(g_mu);
  auto* event = reinterpret_cast<Event*>(e);
  ++g_counters.stream_waits;
  // Captured now: a later record of the same event does not change this wait.
  enqueue(s, [stream = event->stream, target = event->target] {
    if (stream) run_until(stream, target);
  });
  return cudaSuccess;
}
cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t) {
  std::lock_guard lock(g_mu);
  *p = std::malloc(std::max<size_t>(bytes, 1));
  g_device[reinterpret_cast<std::uintptr_t>(*p)] = {bytes, t_device};
  return cudaSuccess;
}
cudaError_t cudaFreeAsync(void* p, cudaStream_t s) {
  std::lock_guard lock(g_mu);
  enqueue(s, [p] {  // stream-ordered: after the work queued before it
    g_device.erase(reinterpret_cast<std::uintptr_t>(p));
    std::free(p);
  });
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind,
                            cudaStream_t s) {
  std::lock_guard lock(g_mu);
  enqueue(s, [=] { std::memmove(dst, src, bytes); });
  return cudaSuccess;
}
cudaError_t cudaMemcpyPeerAsync(void* dst, int, const void* src, int, size_t bytes,
                                cudaStream_t s) {
  std::lock_guard lock(g_mu);
  ++g_counters.peer_copies;
  enqueue(s, [=] { std::memmove(dst, src, bytes); });
  return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* p) {
  std::lock_guard lock(g_mu);
  *attr = cudaPointerAttributes{};
  const Allocation* a = find(p);
  attr->type = a ? cudaMemoryTypeDevice : cudaMemoryTypeUnregistered;
  attr->device = a ? a->device : -1;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  *pool = reinterpret_cast<cudaMemPool_t>(static_cast<std::uintptr_t>(device) + 1);
  return cudaSuccess;
}
cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer) {
  *can = device != peer ? 1 : 0;
  return cudaSuccess;
}
cudaError_t cudaMemPoolSetAccess(cudaMemPool_t, const cudaMemAccessDesc*, size_t count) {
  std::lock_guard lock(g_mu);
  g_counters.pool_grants += static_cast<int>(count);
  return cudaSuccess;
}
}  // extern "C"
