// Must not compile: chapter 04's sharded checkpoint (sharded_checkpoint.h) is
// built for float and double only.
#include <cstdint>

#include "sharded_checkpoint.h"

auto* const load_checkpoint_of_ints = &dtw::ch04::load_checkpoint<std::int64_t>;
