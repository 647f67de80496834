#include "dtw/traffic.h"
#include "dtw/types.h"

#include <numeric>

namespace dtw {

std::string_view name_of(DataType type) {
  switch (type) {
    case DataType::kByte: return "byte";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
  }
  return "?";
}

std::string_view name_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kProd: return "prod";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kAvg: return "avg";
  }
  return "?";
}

std::int64_t Traffic::total_bytes_sent() const {
  return std::accumulate(bytes_sent.begin(), bytes_sent.end(), std::int64_t{0});
}

}  // namespace dtw
