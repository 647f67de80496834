#include "dtw/traffic.h"

#include <numeric>

namespace dtw {

std::int64_t Traffic::total_bytes_sent() const {
  return std::accumulate(bytes_sent.begin(), bytes_sent.end(), std::int64_t{0});
}

}  // namespace dtw
