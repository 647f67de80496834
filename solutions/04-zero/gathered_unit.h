#pragma once
// The per-unit state of GatheredParams (zero3.cpp, zero3_prefetch.cpp): the
// unit's whole copy while some pass uses it or a gather of it is in flight.
#include <memory>

#include "collectives.h"  // chapter 01's solution (DEPENDS 01)
#include "nonblocking.h"  // its non-blocking collectives (solution library)
#include "zero.h"

namespace dtw::ch04 {

template <TrainElement T>
struct GatheredParams<T>::Unit {
  Array<T> copy;    // the whole unit; empty when not gathered
  int holders = 0;  // params() calls not released yet
  // A prefetch still to be taken (step 04.4): chapter 01's ring allgather in
  // place over `copy`, started. It moves only inside test() and wait(), so the
  // rank that started it must poll. Null when none is in flight: a gather that
  // has completed but is not taken yet still counts, which done() alone could
  // not tell from no gather at all.
  std::unique_ptr<ch01::PendingCollective> gather;
};

}  // namespace dtw::ch04
