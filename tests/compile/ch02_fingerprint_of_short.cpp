// Must not compile: chapter 02 (data_parallelism.h) is built for float and
// double only, and any other element type stops the compile with a sentence
// naming them (not an undefined reference at link time).
#include <cstdint>
#include <span>
#include <vector>

#include "data_parallelism.h"

std::vector<std::uint64_t> fingerprint_shorts(const dtw::model::ParamLayout& layout,
                                              std::span<const short> params) {
  return dtw::ch02::fingerprint(layout, params);
}
