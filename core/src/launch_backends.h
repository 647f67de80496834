#pragma once
// Each backend's launch. `first_error`, when given, receives the first rank
// failure (its rank recorded) so the caller can rethrow it.
#include <exception>

#include "dtw/launch.h"

namespace dtw::threads {
Report launch(int world_size, const LaunchOptions& options, const RankFunction& fn,
              std::exception_ptr* first_error);
}  // namespace dtw::threads
