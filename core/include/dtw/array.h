#pragma once
/// @file
/// `dtw::Array<T>`: an owning, move-only buffer of n elements on an `Exec`
/// (host memory, or a CUDA device's), counted in the Exec's memory ledger for
/// its whole life. Chapters 02+ hold every training buffer in Arrays and touch
/// them only through kernels and `Comm`, so moving a chapter to the GPU changes
/// where its Arrays live, not its code.
///
///     dtw::Array<float> grads(comm.exec(), n, dtw::MemoryCategory::kGradients);
///     grads.upload(host_values);          // host -> wherever the Array lives
///     comm.send(grads, peer);             // Comm takes an Array as it is
///     std::vector<float> back(n);
///     grads.download(back);

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "dtw/errors.h"
#include "dtw/exec.h"

namespace dtw {

namespace detail {
// Memory operations on an Exec (core/src/array_memory.cpp): host memory with
// new/memcpy, device memory with the CUDA runtime on the Exec's stream. Every
// call returns once done, so host buffers may be reused at once.
void* allocate_on(const Exec& exec, std::int64_t bytes);
void free_on(const Exec& exec, void* data) noexcept;
void upload_to(const Exec& exec, void* dst, const void* host_src, std::int64_t bytes);
void download_from(const Exec& exec, void* host_dst, const void* src, std::int64_t bytes);
void copy_on(const Exec& exec, void* dst, const void* src, std::int64_t bytes);
void fill_on(const Exec& exec, void* data, std::int64_t count, const void* value,
             std::size_t elem_bytes);
}  // namespace detail

/// n elements of a trivially copyable T on `exec()`. Host Arrays are ordinary
/// memory (64-byte aligned); device Arrays are device pointers: `data()`,
/// `begin()` and `span()` must then not be read on the host -- use `download`,
/// kernels or `Comm`. Move-only; moving leaves the source empty.
template <class T>
class Array {
  static_assert(std::is_trivially_copyable_v<T>, "dtw::Array holds trivially copyable elements");

 public:
  /// Element type.
  using value_type = T;

  /// An empty host Array.
  Array() = default;
  /// `n` uninitialised elements on `exec`, counted in `exec.ledger()` under
  /// `category`. InvalidArgument for n < 0 (naming the ledger's rank);
  /// OutOfMemory past the ledger's cap (nothing is allocated then).
  Array(const Exec& exec, std::int64_t n, MemoryCategory category = MemoryCategory::kOther)
      : exec_(exec), category_(category) {
    const int rank = exec.ledger() ? exec.ledger()->rank() : -1;
    DTW_CHECK_ARG(n >= 0, (rank >= 0 ? "rank " + std::to_string(rank) + ": " : std::string())
                              << "Array of " << n << " elements (" << sizeof(T)
                              << " bytes each) on " << exec.describe() << ": size must be >= 0");
    const std::int64_t bytes = n * static_cast<std::int64_t>(sizeof(T));
    charge_ = MemoryLedger::Charge(exec.ledger(), category, bytes);
    data_ = static_cast<T*>(detail::allocate_on(exec, bytes));
    size_ = n;
  }
  /// `values.size()` elements on `exec`, holding `values`.
  Array(const Exec& exec, std::span<const T> values, MemoryCategory category = MemoryCategory::kOther)
      : Array(exec, static_cast<std::int64_t>(values.size()), category) {
    upload(values);
  }
  /// Takes over `other`'s storage and charge; `other` is left empty.
  Array(Array&& other) noexcept
      : exec_(std::move(other.exec_)),
        category_(other.category_),
        charge_(std::move(other.charge_)),
        data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  /// Releases this array's storage, then takes over `other`'s (left empty).
  Array& operator=(Array&& other) noexcept {
    if (this != &other) {
      release();
      exec_ = std::move(other.exec_);
      category_ = other.category_;
      charge_ = std::move(other.charge_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;
  ~Array() { release(); }

  /// First element (a device pointer on a device Exec; nullptr when empty).
  T* data() { return data_; }
  /// First element (a device pointer on a device Exec; nullptr when empty).
  const T* data() const { return data_; }
  /// Number of elements.
  std::int64_t size() const { return size_; }
  /// Size in bytes.
  std::int64_t bytes() const { return size_ * static_cast<std::int64_t>(sizeof(T)); }
  /// True when the Array holds no element.
  bool empty() const { return size_ == 0; }
  /// The elements as a range (Comm's send and receive take Arrays through it).
  T* begin() { return data_; }
  /// Past the last element.
  T* end() { return data_ + size_; }
  /// The elements as a range.
  const T* begin() const { return data_; }
  /// Past the last element.
  const T* end() const { return data_ + size_; }
  /// The memory as a span (device memory on a device Exec).
  std::span<T> span() { return {data_, static_cast<std::size_t>(size_)}; }
  /// The memory as a read-only span.
  std::span<const T> span() const { return {data_, static_cast<std::size_t>(size_)}; }

  /// Copies `values` (host memory, exactly size() elements) into the Array.
  void upload(std::span<const T> values) {
    check_size("upload", values.size());
    detail::upload_to(exec_, data_, values.data(), bytes());
  }
  /// Copies the Array into `out` (host memory, exactly size() elements).
  void download(std::span<T> out) const {
    check_size("download", out.size());
    detail::download_from(exec_, out.data(), data_, bytes());
  }
  /// The elements, copied to the host.
  std::vector<T> to_vector() const {
    std::vector<T> out(static_cast<std::size_t>(size_));
    download(out);
    return out;
  }
  /// Sets every element to `value`.
  void fill(const T& value) {
    if (exec_.is_host()) {
      std::fill(data_, data_ + size_, value);
    } else {
      detail::fill_on(exec_, data_, size_, &value, sizeof(T));
    }
  }
  /// Copies `other` (same size; any Exec of the same place) into this Array.
  void copy_from(const Array& other) {
    check_size("copy_from", static_cast<std::size_t>(other.size()));
    DTW_CHECK_ARG(same_place(exec_, other.exec()), "Array::copy_from: source is on "
                                                       << other.exec().describe()
                                                       << ", destination on " << exec_.describe());
    detail::copy_on(exec_, data_, other.data(), bytes());
  }

  /// Where the memory lives and which ledger counts it.
  const Exec& exec() const { return exec_; }
  /// The category the ledger counts this Array under.
  MemoryCategory category() const { return category_; }

 private:
  void check_size(const char* what, std::size_t n) const {
    DTW_CHECK_ARG(static_cast<std::int64_t>(n) == size_,
                  "Array::" << what << " of " << n << " elements into an Array of " << size_);
  }
  void release() noexcept {
    if (data_) detail::free_on(exec_, data_);
    data_ = nullptr;
    size_ = 0;
    charge_.reset();
  }

  Exec exec_;
  MemoryCategory category_ = MemoryCategory::kOther;
  MemoryLedger::Charge charge_;
  T* data_ = nullptr;
  std::int64_t size_ = 0;
};

}  // namespace dtw
