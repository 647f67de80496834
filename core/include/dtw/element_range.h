#pragma once
/// @file
/// The ranges `dtw::Comm`'s typed calls accept (std::vector, std::span,
/// std::array, dtw::Array, ... of dtw element types), and their untyped
/// Buffer views. Included by dtw/comm.h.

#include <concepts>
#include <cstdint>
#include <ranges>
#include <type_traits>

#include "dtw/exec.h"
#include "dtw/types.h"

namespace dtw::detail {

/// A contiguous range of dtw element types (vector, span, array, ...).
template <class R>
concept ElementRange = std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
                       kIsElement<std::remove_cv_t<std::ranges::range_value_t<R>>>;

/// A range that says where its memory lives (dtw::Array).
template <class R>
concept HasExec = requires(const R& r) {
  { r.exec() } -> std::convertible_to<const Exec&>;
};

/// `r` as an untyped read-only view (a send's buffer).
template <ElementRange R>
ConstBuffer const_view(const R& r) {
  using T = std::remove_cv_t<std::ranges::range_value_t<R>>;
  return {std::ranges::data(r), static_cast<std::int64_t>(std::ranges::size(r)),
          data_type_of<T>()};
}
/// `r` as an untyped writable view (a receive's buffer); a const range fails to compile.
template <ElementRange R>
Buffer mutable_view(R&& r) {
  using T = std::ranges::range_value_t<R>;
  static_assert(!std::is_const_v<std::remove_reference_t<std::ranges::range_reference_t<R>>>,
                "a receive needs writable memory");
  return {std::ranges::data(r), static_cast<std::int64_t>(std::ranges::size(r)),
          data_type_of<T>()};
}

}  // namespace dtw::detail
