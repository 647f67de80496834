#pragma once
// The per-unit state of GatheredParams (zero3.cpp, zero3_prefetch.cpp): the
// unit's whole copy while some pass uses it or a gather of it is in flight.
#include "collectives.h"  // chapter 01's solution (DEPENDS 01)
#include "zero.h"

namespace dtw::ch04 {

template <class T>
struct GatheredParams<T>::Unit {
  Array<T> copy;    // the whole unit; empty when not gathered
  int holders = 0;  // params() calls not released yet
};

}  // namespace dtw::ch04
