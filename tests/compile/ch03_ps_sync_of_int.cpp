// Must not compile: chapter 03's strategies (parameter_server.h) are built for
// float and double only.
#include <cstdint>

#include "parameter_server.h"

auto* const ps_sync_of_ints = &dtw::ch03::ps_sync<std::int32_t>;
