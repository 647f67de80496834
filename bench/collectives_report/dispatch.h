#pragma once
// Calls f(T{}) with the C++ type of a reducible DataType.
#include <cstdint>

#include "dtw/errors.h"
#include "dtw/types.h"

namespace dtw::bench {

template <class F>
void with_type(DataType type, F&& f) {
  switch (type) {
    case DataType::kFloat32: return f(float{});
    case DataType::kFloat64: return f(double{});
    case DataType::kInt32: return f(std::int32_t{});
    case DataType::kInt64: return f(std::int64_t{});
    case DataType::kByte: break;
  }
  DTW_CHECK_ARG(false, "collectives bench: raw bytes cannot be reduced");
}

}  // namespace dtw::bench
