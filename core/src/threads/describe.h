#pragma once
// One-line descriptions of pending operations, for error and deadlock reports.
#include <string>

#include "dtw/memory.h"  // format_bytes
#include "threads/threads_world.h"

namespace dtw::threads {

// "tag 1 (kRightward)", "tag 7", "collective operation 3"
std::string describe_tag(const Op& op);
// "send to rank 1, tag 1 (kRightward), 8 B (2 float32)"
std::string describe(const Op& op);
// A message naming both sides of a send/receive pair that cannot be matched.
std::string mismatch_message(const Op& send, const Op& recv, const char* what);

}  // namespace dtw::threads
