#pragma once
/// @file
/// The check that a replicated tensor is still the same on every member of
/// its group. Tensor parallelism keeps the norms and the row-parallel biases
/// whole on every rank of the group; they stay equal only while every rank
/// applies the same update. Megatron-SP computes the norms' gradients on a
/// token range each, so a strategy that forgets to sum them over the group
/// lets the copies drift apart silently: this check names the first tensor,
/// element and ranks that differ.

#include <string_view>

#include "dtw/comm.h"
#include "dtw/train/replica.h"

namespace dtw::train {

/// Collective over `group` (the ranks that hold the copies, in the order of
/// the plan's Replication::group_rank): compares every replicated tensor of
/// `replica` bitwise with the group's first member. When a copy differs,
/// every member raises the same InvalidArgument naming `when` (e.g. "after
/// step 3"), the tensor, the element (local and whole index), the group and
/// world ranks whose copies differ, and both values. Returns the number of
/// elements compared on this rank.
template <TrainElement T>
std::int64_t check_replicated(Replica<T>& replica, Comm& group, std::string_view when);

}  // namespace dtw::train
