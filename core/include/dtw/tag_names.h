#pragma once
/// @file
/// Names for message tags, so that deadlock, timeout and mismatch reports say
/// `tag 1 (kRightward)` rather than a bare number.

#include <string>
#include <string_view>

namespace dtw {

/// Gives the user tag `tag` the name `name` in this process's reports. Names
/// go by value: a value named twice (two chapters' constants) shows both,
/// "kRightward or kTokenTag". Tags of collective operations are never named
/// this way (reports call them "collective operation N"). Thread-safe; returns
/// true, so a constant can be named where it is defined (DTW_NAME_TAG).
bool name_tag(int tag, std::string_view name);

/// The names given to `tag`, joined with " or "; empty when it has none.
std::string tag_name(int tag);

}  // namespace dtw

/// Names the integer constant `constant` after itself in reports: at namespace
/// scope, after `constexpr int kRightward = 1;` write `DTW_NAME_TAG(kRightward);`.
#define DTW_NAME_TAG(constant) \
  [[maybe_unused]] inline const bool dtw_tag_named_##constant##_ = ::dtw::name_tag(constant, #constant)
