// Step 04.4, ZeRO-3 with prefetch: gather the next units while this one
// computes.
//
// Without prefetch every gather sits on the critical path: the model asks for
// unit u, the rank gathers it and only then computes. But the order in which
// the model asks does not change from one pass to the next, so the first pass
// records it (GatheredParams::params, in zero3.cpp) and from then on, each
// time the model takes the unit at position i of that order, the rank starts
// the gathers of positions i+1 .. i+d, the next d units (d: the prefetch
// depth), and computes unit i while they move:
//
//   position:    i          i+1         i+2
//   compute:  [ h.0 ]    [ h.1 ]     [ h.2 ]
//   gathers:  ▓ h.1 ▓▓ → ▓ h.2 ▓▓  → ▓ h.3 ▓▓      (d = 1)
//
// Memory stays bounded: a unit is gathered ahead only when it appears in the
// next d positions, so at most d copies are in flight (or gathered and not
// taken yet) besides the units the model holds: 1 + d units whole, and the
// embedding a tied head borrows. The bytes do not change: a unit is gathered
// ahead only if it is not held now, and it is not held until its position
// comes, so it is exactly the gather ZeRO-3 would have done there. The window
// never crosses the end of a pass, where the optimizer step (or the next
// micro-batch) comes: the parameters of the next step do not exist yet.
//
// A gather started here shares no fingerprint naming its unit (gather_now's
// "zero3 gather NAME"; chapter 01's own check of the call and its count runs
// as for every collective): the units it starts are fixed by the recorded order,
// the first pass that recorded it fingerprinted every one of its gathers, and
// params() checks every later pass against the record on every rank. So ranks
// that agreed in the first pass start the same gathers here, and a rank whose
// pass departs from the record stops with the position and the unit.
//
// The gathers move only when this rank polls them (chapter 01: on the threads
// backend nothing moves between a rank's calls), so every params() and
// release() first advances every gather in flight, a round each if its
// neighbours have done theirs.
#include <algorithm>

#include "gathered_unit.h"

namespace dtw::ch04 {

template <TrainElement T>
void GatheredParams<T>::take(int u) {
  Unit& unit = *units_[static_cast<std::size_t>(u)];
  if (unit.gather != nullptr) {
    DTW_TODO("04.4: Unit u was gathered ahead: wait for its gather to finish, then drop the handle (its copy is the unit, whole).");
    return;
  }
  // Not prefetched: the first pass, depth 0, or a unit held when its turn was seen.
  gather_now(u);
}

template <TrainElement T>
void GatheredParams<T>::progress() {
  for (const auto& unit : units_)
    if (unit->gather != nullptr) unit->gather->test();
}

template <TrainElement T>
void GatheredParams<T>::prefetch_after(int position) {
  DTW_TODO("04.4: For each of the next depth_ positions of order_ (not past the pass's end), start the gather of its unit unless it is held or already on its way.");
}

template void GatheredParams<float>::take(int);
template void GatheredParams<double>::take(int);
template void GatheredParams<float>::progress();
template void GatheredParams<double>::progress();
template void GatheredParams<float>::prefetch_after(int);
template void GatheredParams<double>::prefetch_after(int);

}  // namespace dtw::ch04
