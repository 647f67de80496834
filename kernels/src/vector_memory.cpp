// Memory on a Place for kernels::Vector (dtw/kernels/vector.h): the host with
// aligned new and memcpy, a device through cuda/memory.cu on the Place's
// stream, with the Place's device made current first (placed.h). A build
// without CUDA answers a device Place with placed.h's clear error.
#include <cstring>
#include <new>

#include "dtw/kernels/cuda_fill.h"
#include "dtw/kernels/cuda_memory.h"
#include "dtw/kernels/vector.h"
#include "placed.h"

namespace dtw::kernels::detail {

namespace {
constexpr std::align_val_t kHostAlignment{64};  // a cache line, as dtw::Array's host memory
}  // namespace

void* vector_allocate(const Place& at, std::size_t bytes) {
  if (bytes == 0) return nullptr;
  if (at.is_host()) return ::operator new(bytes, kHostAlignment);
  void* p = nullptr;
  on_device(at, "Vector (allocate)", [&](auto s) { p = device_allocate(bytes, s); });
  return p;
}

void vector_free(const Place& at, void* data) noexcept {
  if (data == nullptr) return;
  if (at.is_host()) return ::operator delete(data, kHostAlignment);
  try {
    on_device(at, "Vector (free)", [&](auto s) { device_free(data, s); });
  } catch (
      ...) {  // NOLINT(bugprone-empty-catch): a destructor cannot report; the memory is the pool's
  }
}

void vector_copy(const Place& to, void* dst, const Place& from, const void* src,
                 std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  if (to.is_host() && from.is_host()) {
    std::memmove(dst, src, bytes);
    return;
  }
  // Ordered on the device side's stream (the destination's when both are
  // devices); waited for when the host is one side, so its memory may be
  // reused or read at once.
  const Place& on = to.is_host() ? from : to;
  const bool host_side = to.is_host() || from.is_host();
  on_device(on, "Vector (copy)", [&](auto s) { device_copy(dst, src, bytes, s, host_side); });
}

void vector_zero(const Place& at, void* data, std::size_t bytes) {
  if (bytes == 0) return;
  if (at.is_host()) {
    std::memset(data, 0, bytes);
    return;
  }
  on_device(at, "Vector (zero)", [&](auto s) { device_zero(data, bytes, s); });
}

void vector_fill(const Place& at, void* data, std::size_t count, const void* value,
                 std::size_t elem_bytes) {
  if (count == 0) return;
  if (at.is_host()) {
    auto* out = static_cast<unsigned char*>(data);
    for (std::size_t i = 0; i < count; ++i) std::memcpy(out + i * elem_bytes, value, elem_bytes);
    return;
  }
  on_device(at, "Vector (fill)", [&](auto s) {
    device_fill(data, static_cast<std::int64_t>(count), value, elem_bytes, s);
  });
}

void vector_not_on_host(const Place& at, const char* what) {
  ::dtw::detail::raise<InvalidArgument>(
      ::dtw::detail::Message() << "kernels::Vector::" << what << " on " << at.describe()
                               << ": the elements live on the device; use kernels on "
                                  "its Place, Comm, or to_vector()",
      __FILE__, __LINE__);
}

}  // namespace dtw::kernels::detail
