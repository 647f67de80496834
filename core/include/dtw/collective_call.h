#pragma once
/// @file
/// `dtw::CollectiveCall`: what a rank says it is calling when the collective
/// fingerprint check compares the ranks' calls (`Comm::verify_collective`).
/// Included by dtw/comm.h, where it is also `Comm::CollectiveCall`.

#include <cstdint>

#include "dtw/types.h"

namespace dtw {

/// What a rank says it is calling, for `Comm::verify_collective`.
struct CollectiveCall {
  const char* name = "";  ///< "allreduce", "broadcast", ...
  /// Elements per rank the call moves or reduces.
  std::int64_t count = 0;
  /// Element type of the call's buffers.
  DataType type = DataType::kByte;
  int op = -1;    ///< static_cast<int>(ReduceOp), or -1 when the collective has none
  int root = -1;  ///< -1 when the collective has none
};

}  // namespace dtw
