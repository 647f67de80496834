#pragma once
// The per-unit state of GatheredParams (zero3.cpp, zero3_prefetch.cpp): the
// unit's whole copy while some pass uses it or a gather of it is in flight.
#include <memory>
#include <span>
#include <vector>

#include "collectives.h"  // chapter 01's solution (DEPENDS 01)
#include "zero.h"

namespace dtw::ch04 {

// Chapter 01's ring allgather, in place over a unit's buffer (chunk r is
// already there) and started rather than run: round s sends chunk r − s to
// the right and receives chunk r − s − 1 from the left, and a round is posted
// only when the one before it has completed on this rank. So rank r sends
// every chunk but chunk r + 1's, exactly what ch01::allgather_in_place sends.
// (Chapter 01's iallgather wants p equal blocks; a unit's chunks are uneven
// when p does not divide it, so the gather ahead is written out here.)
// It moves only inside test() and wait(): the rank that started it must poll.
template <class T>
class RingGather {
 public:
  RingGather(Comm& comm, std::span<T> data)
      : channel_(comm.collective_channel()),
        data_(data),
        chunks_(std::ssize(data), comm.size()),
        tag_(comm.next_collective_tag()) {
    post();
  }
  // Completes what can complete without blocking; true once every round has.
  bool test() {
    while (round_ < channel_.size() - 1) {
      for (Request& request : requests_)
        if (!channel_.test(request)) return false;
      ++round_;
      post();
    }
    return true;
  }
  // Blocks until the whole unit is here.
  void wait() {
    while (round_ < channel_.size() - 1) {
      channel_.wait_all(requests_);
      ++round_;
      post();
    }
  }

 private:
  void post() {
    requests_.clear();
    const int p = channel_.size(), r = channel_.rank(), s = round_;
    if (s >= p - 1) return;
    requests_.push_back(channel_.isend(chunks_.of(data_, r - s), (r + 1) % p, tag_));
    requests_.push_back(channel_.irecv(chunks_.of(data_, r - s - 1), (r + p - 1) % p, tag_));
  }
  Comm& channel_;
  std::span<T> data_;
  Chunks chunks_;
  int tag_;
  int round_ = 0;
  std::vector<Request> requests_;  // the current round's send and receive
};

template <class T>
struct GatheredParams<T>::Unit {
  Array<T> copy;                          // the whole unit; empty when not gathered
  int holders = 0;                        // params() calls not released yet
  std::unique_ptr<RingGather<T>> gather;  // a prefetch still to be taken (step 04.4)
};

}  // namespace dtw::ch04
