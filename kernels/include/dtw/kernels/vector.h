#pragma once
/// @file
/// `dtw::kernels::Vector<T>`: a growable buffer on a Place -- what the model
/// keeps between its forward and backward passes (activations, caches,
/// scratch) and what a seam writes a changed activation into.
///
/// It reads like the `std::vector` it replaces (`resize`, `data`, `size`,
/// spans over it), so code that sizes a buffer and hands its `data()` to
/// kernels or to `Comm` does not change when the buffer moves to a GPU. On the
/// host it is ordinary memory, and everything a vector does works. On a
/// device Place `data()` is a device pointer: only kernels on that Place and
/// `Comm` may touch it, `operator[]` and the other host-side element accesses
/// raise InvalidArgument naming the Place, and `to_vector()` copies it back.
///
///     kernels::Vector<float> acts(exec.place());   // empty, on the rank's Place
///     acts.resize(rows * dim);                      // new elements are zero
///     kernels::gelu_forward(acts.place(), acts.data(), pre, rows * dim);
///
/// Unlike `dtw::Array` (core) it grows, keeps its contents when it does, and
/// is not counted in a memory ledger: the training layer charges a forward's
/// activations as a whole (Gpt::activation_bytes). Device memory comes from
/// the stream-ordered allocator on the Place's stream (cudaMallocAsync), so a
/// buffer resized each step reuses the pool rather than the driver.
/// Copies of a Vector live on the same Place; every operation returns once
/// the host may reuse what it passed.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "dtw/errors.h"
#include "dtw/kernels/place.h"

namespace dtw::kernels {

namespace detail {
// Memory on a Place (kernels/src/vector_memory.cpp): host memory with
// new/memcpy/memset, device memory with the CUDA runtime on the Place's stream.
void* vector_allocate(const Place& at, std::size_t bytes);
void vector_free(const Place& at, void* data) noexcept;
// Copies `bytes` from `src` on `from` to `dst` on `to` (any two Places); done
// as far as the host is concerned when it returns when either side is the host.
void vector_copy(const Place& to, void* dst, const Place& from, const void* src, std::size_t bytes);
// Sets `bytes` bytes at `data` on `at` to zero.
void vector_zero(const Place& at, void* data, std::size_t bytes);
// Sets `count` elements of `elem_bytes` bytes at `data` on `at` to `*value`.
void vector_fill(const Place& at, void* data, std::size_t count, const void* value,
                 std::size_t elem_bytes);
// Raises InvalidArgument: `what` is a host-side access of a buffer on `at`.
[[noreturn]] void vector_not_on_host(const Place& at, const char* what);
}  // namespace detail

/// A growable buffer of trivially copyable T on a Place (see the file comment).
template <class T>
class Vector {
  static_assert(std::is_trivially_copyable_v<T>,
                "kernels::Vector holds trivially copyable elements");

 public:
  using value_type = T;             ///< element type
  using size_type = std::size_t;    ///< sizes, as std::vector's
  using iterator = T*;              ///< contiguous: spans are made over it
  using const_iterator = const T*;  ///< contiguous, read-only

  /// An empty buffer on the host.
  Vector() = default;
  /// An empty buffer on `at`.
  explicit Vector(const Place& at) : place_(at) {}
  /// `n` zeros on the host.
  explicit Vector(size_type n) { resize(n); }
  /// `n` copies of `value` on the host.
  Vector(size_type n, const T& value) { assign(n, value); }
  /// The values, on the host.
  Vector(std::initializer_list<T> values) { assign(values.begin(), values.end()); }
  /// A copy of `other`'s elements on the same Place.
  Vector(const Vector& other) : place_(other.place_) { copy_elements(other); }
  /// Takes over `other`'s memory; `other` is left empty on its Place.
  Vector(Vector&& other) noexcept
      : place_(other.place_),
        data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        capacity_(std::exchange(other.capacity_, 0)) {}
  /// Becomes a copy of `other`'s elements on this buffer's Place.
  Vector& operator=(const Vector& other) {
    if (this != &other) copy_elements(other);
    return *this;
  }
  /// Takes over `other`'s memory and Place.
  Vector& operator=(Vector&& other) noexcept {
    Vector(std::move(other)).swap(*this);
    return *this;
  }
  ~Vector() { release(); }

  /// Where the memory lives.
  const Place& place() const { return place_; }
  /// Moves the buffer to `at`, keeping its elements (copied across when the
  /// device changes; the same device with another stream keeps the memory).
  void set_place(const Place& at) {
    if (at == place_) return;
    if (at.device == place_.device || capacity_ == 0) {
      if (at.device != place_.device) release();  // nothing held: just forget the old Place
      place_ = at;
      return;
    }
    Vector moved(at);
    moved.reallocate(size_);
    detail::vector_copy(at, moved.data_, place_, data_, size_ * sizeof(T));
    moved.size_ = size_;
    swap(moved);
  }

  /// Number of elements.
  size_type size() const { return size_; }
  /// True when it holds no element.
  bool empty() const { return size_ == 0; }
  /// Elements it can hold without allocating.
  size_type capacity() const { return capacity_; }
  /// First element (a device pointer on a device Place; nullptr when nothing was allocated).
  T* data() { return data_; }
  /// First element.
  const T* data() const { return data_; }
  /// The elements as a range (a span over a Vector is made from these).
  T* begin() { return data_; }
  /// Past the last element.
  T* end() { return data_ + size_; }
  /// The elements as a range.
  const T* begin() const { return data_; }
  /// Past the last element.
  const T* end() const { return data_ + size_; }

  /// Element i (host buffers only: InvalidArgument on a device).
  T& operator[](size_type i) {
    if (!place_.is_host()) detail::vector_not_on_host(place_, "operator[]");
    return data_[i];
  }
  /// Element i (host buffers only).
  const T& operator[](size_type i) const {
    if (!place_.is_host()) detail::vector_not_on_host(place_, "operator[]");
    return data_[i];
  }

  /// `n` elements: those it held first are kept, new ones are zero.
  void resize(size_type n) {
    if (n > capacity_) grow(n);
    if (n > size_) detail::vector_zero(place_, data_ + size_, (n - size_) * sizeof(T));
    size_ = n;
  }
  /// Room for `n` elements, keeping those it holds.
  void reserve(size_type n) {
    if (n > capacity_) grow(n);
  }
  /// No elements; the memory is kept for the next resize.
  void clear() { size_ = 0; }
  /// Gives the memory back when it holds no element (as `Vector().swap(b)`).
  void shrink_to_fit() {
    if (size_ == 0) release();
  }
  /// `n` copies of `value`.
  void assign(size_type n, const T& value) {
    if (n > capacity_) reallocate(n);
    detail::vector_fill(place_, data_, n, &value, sizeof(T));
    size_ = n;
  }
  /// The host values [first, last) (pointers or a vector's iterators).
  template <class It>
  void assign(It first, It last) {
    const std::vector<T> host(first, last);
    if (host.size() > capacity_) reallocate(host.size());
    detail::vector_copy(place_, data_, Place::host(), host.data(), host.size() * sizeof(T));
    size_ = host.size();
  }
  /// Appends the host values [first, last) at `pos`, which must be end().
  template <class It>
  void insert(const T* pos, It first, It last) {
    DTW_CHECK_ARG(pos == end(), "kernels::Vector::insert on " << place_.describe()
                                                              << ": only appending (pos == end())");
    const std::vector<T> host(first, last);
    const size_type old = size_;
    reserve(std::max(old + host.size(), 2 * capacity_));
    detail::vector_copy(place_, data_ + old, Place::host(), host.data(), host.size() * sizeof(T));
    size_ = old + host.size();
  }
  /// The elements, copied to the host.
  std::vector<T> to_vector() const {
    std::vector<T> out(size_);
    detail::vector_copy(Place::host(), out.data(), place_, data_, size_ * sizeof(T));
    return out;
  }
  /// Exchanges contents and Places with `other`.
  void swap(Vector& other) noexcept {
    std::swap(place_, other.place_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
  }

 private:
  // Fresh memory for n elements on place_; the old contents are dropped.
  void reallocate(size_type n) {
    T* fresh = static_cast<T*>(detail::vector_allocate(place_, n * sizeof(T)));
    release();
    data_ = fresh;
    capacity_ = n;
  }
  // Room for n > capacity_ elements, keeping the size_ held.
  void grow(size_type n) {
    T* fresh = static_cast<T*>(detail::vector_allocate(place_, n * sizeof(T)));
    if (size_ > 0) detail::vector_copy(place_, fresh, place_, data_, size_ * sizeof(T));
    const size_type kept = size_;
    release();
    data_ = fresh;
    size_ = kept;
    capacity_ = n;
  }
  void copy_elements(const Vector& other) {
    if (other.size_ > capacity_) reallocate(other.size_);
    if (other.size_ > 0)
      detail::vector_copy(place_, data_, other.place_, other.data_, other.size_ * sizeof(T));
    size_ = other.size_;
  }
  void release() noexcept {
    if (data_ != nullptr) detail::vector_free(place_, data_);
    data_ = nullptr;
    size_ = 0;
    capacity_ = 0;
  }

  Place place_;
  T* data_ = nullptr;
  size_type size_ = 0;
  size_type capacity_ = 0;
};

/// `values` (memory on `from`: the host's, or a device's) copied to a new
/// host vector: how code above the kernels reads a piece of a buffer it
/// holds only as a span, such as a replica's parameters, wherever it lives.
template <class T>
std::vector<T> to_host(const Place& from, std::span<const T> values) {
  std::vector<T> out(values.size());
  detail::vector_copy(Place::host(), out.data(), from, values.data(), values.size() * sizeof(T));
  return out;
}

}  // namespace dtw::kernels
