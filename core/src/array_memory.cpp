// Memory operations behind dtw::Array: host memory with aligned new and
// memcpy, device memory with the CUDA runtime on the Exec's stream. Every call
// returns once its work is done (device calls synchronise the stream), so the
// caller may reuse a host buffer, or free the Array, at once.
#include <cstring>
#include <new>

#include "dtw/array.h"
#include "dtw/config.h"
#include "dtw/errors.h"
#if DTW_HAVE_CUDA
#include "dtw/cuda_check.h"
#include "dtw/kernels/cuda_fill.h"
#endif

namespace dtw::detail {
namespace {
// Host Arrays start on a cache line, so kernels vectorise them and two ranks'
// Arrays never share a line.
constexpr std::align_val_t kHostAlignment{64};

#if DTW_HAVE_CUDA
cudaStream_t stream_of(const Exec& exec) { return static_cast<cudaStream_t>(exec.stream()); }

// Device calls run on the Exec's device, whichever device the thread had.
class OnDevice {
 public:
  explicit OnDevice(const Exec& exec) {
    DTW_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != exec.device()) DTW_CUDA_CHECK(cudaSetDevice(exec.device()));
  }
  ~OnDevice() { cudaSetDevice(previous_); }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

 private:
  int previous_ = 0;
};

void sync(const Exec& exec) { DTW_CUDA_CHECK(cudaStreamSynchronize(stream_of(exec))); }
#else
[[noreturn]] void no_cuda(const Exec& exec, const char* what) {
  raise<InvalidArgument>(Message() << what << " on " << exec.describe()
                                  << ": this build has no CUDA (configure where the CUDA toolkit "
                                     "is installed, with -DDTW_ENABLE_CUDA=ON)",
                        __FILE__, __LINE__);
}
#endif
}  // namespace

void* allocate_on(const Exec& exec, std::int64_t bytes) {
  if (bytes == 0) return nullptr;
  if (exec.is_host()) return ::operator new(static_cast<std::size_t>(bytes), kHostAlignment);
#if DTW_HAVE_CUDA
  const OnDevice on(exec);
  void* p = nullptr;
  // Stream-ordered: the pool hands back memory freed on the same stream at once.
  DTW_CUDA_CHECK(cudaMallocAsync(&p, static_cast<std::size_t>(bytes), stream_of(exec)));
  sync(exec);
  return p;
#else
  no_cuda(exec, "allocate");
#endif
}

void free_on(const Exec& exec, void* data) noexcept {
  if (!data) return;
  if (exec.is_host()) {
    ::operator delete(data, kHostAlignment);
    return;
  }
#if DTW_HAVE_CUDA
  int previous = 0;
  cudaGetDevice(&previous);
  cudaSetDevice(exec.device());
  cudaFreeAsync(data, stream_of(exec));
  cudaSetDevice(previous);
#endif
}

void upload_to(const Exec& exec, void* dst, const void* host_src, std::int64_t bytes) {
  if (bytes == 0) return;
  if (exec.is_host()) {
    std::memcpy(dst, host_src, static_cast<std::size_t>(bytes));
    return;
  }
#if DTW_HAVE_CUDA
  const OnDevice on(exec);
  DTW_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, static_cast<std::size_t>(bytes),
                                 cudaMemcpyHostToDevice, stream_of(exec)));
  sync(exec);
#else
  no_cuda(exec, "upload");
#endif
}

void download_from(const Exec& exec, void* host_dst, const void* src, std::int64_t bytes) {
  if (bytes == 0) return;
  if (exec.is_host()) {
    std::memcpy(host_dst, src, static_cast<std::size_t>(bytes));
    return;
  }
#if DTW_HAVE_CUDA
  const OnDevice on(exec);
  DTW_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, static_cast<std::size_t>(bytes),
                                 cudaMemcpyDeviceToHost, stream_of(exec)));
  sync(exec);
#else
  no_cuda(exec, "download");
#endif
}

void copy_on(const Exec& exec, void* dst, const void* src, std::int64_t bytes) {
  if (bytes == 0 || dst == src) return;
  if (exec.is_host()) {
    std::memmove(dst, src, static_cast<std::size_t>(bytes));
    return;
  }
#if DTW_HAVE_CUDA
  const OnDevice on(exec);
  DTW_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(bytes),
                                 cudaMemcpyDeviceToDevice, stream_of(exec)));
  sync(exec);
#else
  no_cuda(exec, "copy");
#endif
}

void fill_on(const Exec& exec, void* data, std::int64_t count, const void* value,
             std::size_t elem_bytes) {
  if (count == 0) return;
  if (exec.is_host()) {
    auto* out = static_cast<unsigned char*>(data);
    for (std::int64_t i = 0; i < count; ++i)
      std::memcpy(out + i * static_cast<std::int64_t>(elem_bytes), value, elem_bytes);
    return;
  }
#if DTW_HAVE_CUDA
  const OnDevice on(exec);
  kernels::device_fill(data, count, value, elem_bytes, exec.stream());
  sync(exec);
#else
  no_cuda(exec, "fill");
#endif
}

}  // namespace dtw::detail

namespace dtw {
Exec Exec::cuda(int device, void* stream) {
  DTW_CHECK_ARG(device >= 0, "Exec::cuda: device " << device << " must be >= 0");
  Exec e;
  e.device_ = device;
  e.stream_ = stream;
  return e;
}
}  // namespace dtw
