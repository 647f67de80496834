#pragma once
// An internal counter of train::replay_on (train/src/fabric.cpp), for tests.
#include <cstdint>

namespace dtw::train {

// The work of every replay_on of this process so far: message completions
// evaluated, calls placed on their rank's list, and visits to ranks and lanes
// taken from the list of the ready. A regression test reads it: a replay must
// cost O(events) of these, never O(events) per message (a collective of k
// rounds looking at its earlier rounds for each made a ring all-reduce cost
// p³) nor O(ranks) per hop (sweeping every rank until none moved).
std::int64_t replay_looks();

}  // namespace dtw::train
