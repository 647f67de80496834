#pragma once
/// @file
/// Element types and reduction operators shared by every backend.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

namespace dtw {

/// The element types a message or a reduction can carry.
enum class DataType : std::uint8_t { kByte, kInt32, kInt64, kFloat32, kFloat64 };

/// Bytes per element of `type`.
constexpr std::size_t size_of(DataType type) {
  switch (type) {
    case DataType::kByte: return 1;
    case DataType::kInt32: return 4;
    case DataType::kFloat32: return 4;
    case DataType::kInt64: return 8;
    case DataType::kFloat64: return 8;
  }
  return 0;
}

/// Short name of `type` as printed in messages and tables ("float32", "int64",
/// ...; "?" for a value outside the enum).
std::string_view name_of(DataType type);
/// True when `type` is one of the enumerators (not an integer cast out of range).
constexpr bool is_valid(DataType type) {
  return static_cast<unsigned>(type) <= static_cast<unsigned>(DataType::kFloat64);
}

/// Calls `f(std::type_identity<T>{})` with the C++ type T of `type`
/// (std::byte, std::int32_t, std::int64_t, float, double) and returns what it
/// returns: the one place a DataType becomes a type. For example
///
///     visit(buf.type, [&](auto t) {
///       using T = typename decltype(t)::type;
///       std::fill_n(static_cast<T*>(buf.data), buf.count, T{});
///     });
///
/// Every branch must return the same type. Code that cannot take raw bytes
/// checks for kByte first and skips it with `if constexpr`.
template <class F>
decltype(auto) visit(DataType type, F&& f) {
  switch (type) {
    case DataType::kInt32: return f(std::type_identity<std::int32_t>{});
    case DataType::kInt64: return f(std::type_identity<std::int64_t>{});
    case DataType::kFloat32: return f(std::type_identity<float>{});
    case DataType::kFloat64: return f(std::type_identity<double>{});
    case DataType::kByte: break;
  }
  return f(std::type_identity<std::byte>{});
}

/// The element-wise reductions. `kAvg` is a sum divided by the group size
/// afterwards; local kernels see it as `kSum` and the caller divides.
enum class ReduceOp : std::uint8_t { kSum, kProd, kMin, kMax, kAvg };

/// Short name of `op` ("sum", "prod", "min", "max", "avg"; "?" outside the enum).
std::string_view name_of(ReduceOp op);
/// True when `op` is one of the enumerators (not an integer cast out of range).
constexpr bool is_valid(ReduceOp op) {
  return static_cast<unsigned>(op) <= static_cast<unsigned>(ReduceOp::kAvg);
}

/// True for the C++ types a `Comm` can send: std::byte, int32_t, int64_t, float, double.
template <class T>
inline constexpr bool kIsElement =
    std::is_same_v<T, std::byte> || std::is_same_v<T, std::int32_t> ||
    std::is_same_v<T, std::int64_t> || std::is_same_v<T, float> || std::is_same_v<T, double>;

/// True for the number types the workbench's typed templates are built for:
/// int32_t, int64_t, float, double (a Comm also sends std::byte, which is not a number).
template <class T>
inline constexpr bool kIsNumeric = std::is_same_v<T, std::int32_t> ||
                                   std::is_same_v<T, std::int64_t> || std::is_same_v<T, float> ||
                                   std::is_same_v<T, double>;

namespace detail {
// Checked by NumericElement: a static_assert rather than a plain constraint,
// so that another T stops the compile with this sentence instead of a list of
// candidates, or (the definitions live in a library) an undefined reference at link time.
// A const T is only ever deduced while overload resolution tries a read-only
// argument against a writable parameter; it fails quietly so that the
// overload meant (allreduce's out-of-place form) is found.
template <class T>
constexpr bool numeric_element() {
  if constexpr (!std::is_same_v<T, std::remove_cv_t<T>>) {
    return false;
  } else {
    static_assert(kIsNumeric<T>,
                  "dtw: this template is built (explicitly instantiated in its library) for "
                  "float, double, std::int32_t and std::int64_t only; convert the data to one "
                  "of them");
    return true;
  }
}
}  // namespace detail

/// The element type of a template whose definitions are compiled once, in a
/// library, for float, double, int32_t and int64_t (chapter 00's and 01's
/// collectives). Any other T is a compile-time error naming these four.
template <class T>
concept NumericElement = detail::numeric_element<T>();

/// True for the element types the training layer is built for: float and double
/// (RunSpec::dtype kFloat32 and kFloat64).
template <class T>
inline constexpr bool kIsTrainElement = std::is_same_v<T, float> || std::is_same_v<T, double>;

namespace detail {
// Checked by TrainElement, for the reasons numeric_element gives: the sentence
// instead of a list of candidates or an undefined reference at link time, and
// a const T fails quietly.
template <class T>
constexpr bool train_element() {
  if constexpr (!std::is_same_v<T, std::remove_cv_t<T>>) {
    return false;
  } else {
    static_assert(kIsTrainElement<T>,
                  "dtw: the training layer (dtw::model, dtw::train and chapters 02-05) is built "
                  "(explicitly instantiated at the end of each of its .cpp files) for float and "
                  "double only; use one of them (RunSpec::dtype kFloat32 or kFloat64)");
    return true;
  }
}
}  // namespace detail

/// The element type of a training-layer template whose definitions are
/// compiled once, in a library, for float and double: the model (Mlp, Gpt and
/// their layers), the training layer (Replica, RankRun, ...) and chapters
/// 02-05's strategies and helpers. Any other T is a compile-time error naming
/// the two.
template <class T>
concept TrainElement = detail::train_element<T>();

/// The DataType tag of element type `T`.
template <class T>
constexpr DataType data_type_of() {
  static_assert(kIsElement<std::remove_cv_t<T>>,
                "dtw messages carry std::byte, int32_t, int64_t, float or double");
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, std::byte>) return DataType::kByte;
  else if constexpr (std::is_same_v<U, std::int32_t>) return DataType::kInt32;
  else if constexpr (std::is_same_v<U, std::int64_t>) return DataType::kInt64;
  else if constexpr (std::is_same_v<U, float>) return DataType::kFloat32;
  else return DataType::kFloat64;
}

/// An untyped view of message memory: `count` elements of `type` at `data`.
/// `count` is signed so that a negative count from a caller's arithmetic is
/// caught and reported instead of wrapping to a huge size.
struct Buffer {
  /// First element.
  void* data = nullptr;
  /// Number of elements (negative only by mistake, and then rejected).
  std::int64_t count = 0;
  /// Element type.
  DataType type = DataType::kByte;
  /// Size in bytes: count times the element size.
  std::int64_t bytes() const { return count * static_cast<std::int64_t>(size_of(type)); }
};

/// A read-only Buffer (what a send carries).
struct ConstBuffer {
  /// First element.
  const void* data = nullptr;
  /// Number of elements (negative only by mistake, and then rejected).
  std::int64_t count = 0;
  /// Element type.
  DataType type = DataType::kByte;
  /// An empty view.
  ConstBuffer() = default;
  /// Views `n` elements of type `t` at `d`.
  ConstBuffer(const void* d, std::int64_t n, DataType t) : data(d), count(n), type(t) {}
  /// A read-only view of a writable one.
  ConstBuffer(Buffer b) : data(b.data), count(b.count), type(b.type) {}  // NOLINT: widening is safe
  /// Size in bytes: count times the element size.
  std::int64_t bytes() const { return count * static_cast<std::int64_t>(size_of(type)); }
};

/// Views a typed span as a Buffer.
template <class T>
Buffer as_buffer(std::span<T> s) {
  return {s.data(), static_cast<std::int64_t>(s.size()), data_type_of<T>()};
}
/// Views a typed read-only span as a ConstBuffer.
template <class T>
ConstBuffer as_buffer(std::span<const T> s) {
  return {s.data(), static_cast<std::int64_t>(s.size()), data_type_of<T>()};
}

}  // namespace dtw
