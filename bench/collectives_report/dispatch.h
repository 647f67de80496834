#pragma once
// Calls f(T{}) with the C++ type of a reducible DataType (through dtw::visit).
#include <cstdint>
#include <type_traits>

#include "dtw/errors.h"
#include "dtw/types.h"

namespace dtw::bench {

template <class F>
void with_type(DataType type, F&& f) {
  DTW_CHECK_ARG(type != DataType::kByte, "collectives bench: raw bytes cannot be reduced");
  visit(type, [&](auto t) {
    using T = typename decltype(t)::type;
    if constexpr (!std::is_same_v<T, std::byte>) f(T{});
  });
}

}  // namespace dtw::bench
