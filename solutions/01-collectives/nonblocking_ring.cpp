// @solution-only: the non-blocking ring collectives (not a lab step; tools/gen-labs skips this file)
//
// iallreduce, ireduce_scatter, iallgather and iallgather_in_place: the ring
// algorithms of reduce_scatter_ring.cpp and allgather_ring.cpp, cut into
// rounds that a PendingCollective advances (nonblocking_engine.cpp). Round s of the
// reduce-scatter posts
//     isend(chunk r-s-1 -> right) and irecv_reduce(chunk r-s-2 <- left),
// round s of the allgather
//     isend(chunk r-s -> right)   and irecv(chunk r-s-1 <- left);
// an allreduce is the p-1 rounds of the first followed by the p-1 of the
// second. A round starts only when the one before it has completed on this
// rank: what it sends is what the previous round received.
//
// Why irecv_reduce and not irecv then a local reduction: on the threads
// backend the receiver adds the sender's chunk straight into its own (one pass
// over memory), as the blocking recv_reduce does; the other backends receive
// into scratch and reduce when the request completes.
//
// Like their blocking forms, these take their tag from the communicator's
// operation counter and talk on its collective channel; the argument checks
// and the fingerprint check happen when the collective starts.
#include <memory>
#include <string>

#include "algorithms.h"
#include "nonblocking_schedule.h"

namespace dtw::ch01 {
namespace {

enum class Ring { kAllreduce, kReduceScatter, kAllgather };

template <class T>
class RingSchedule final : public detail::Schedule {
 public:
  RingSchedule(Comm& user, Ring kind, std::span<T> data, std::span<T> out, ReduceOp op)
      : Schedule(user.collective_channel()),
        user_(user),
        kind_(kind),
        data_(data),
        out_(out),
        op_(op),
        chunks_(std::ssize(data), user.size()),
        tag_(user.next_collective_tag()) {}

  bool post_round(int round, std::vector<Request>& requests) override {
    Comm& c = channel();
    const int p = c.size(), r = c.rank();
    const int right = (r + 1) % p, left = (r + p - 1) % p;
    const int reduce_rounds = kind_ == Ring::kAllgather ? 0 : p - 1;
    const int gather_rounds = kind_ == Ring::kReduceScatter ? 0 : p - 1;
    if (round < reduce_rounds) {
      const int s = round;
      // kAvg sums here; finish() divides once.
      const ReduceOp sum = op_ == ReduceOp::kAvg ? ReduceOp::kSum : op_;
      requests.push_back(c.isend(chunks_.of(data_, r - s - 1), right, tag_));
      requests.push_back(c.irecv_reduce(chunks_.of(data_, r - s - 2), left, sum, tag_));
      return true;
    }
    if (round < reduce_rounds + gather_rounds) {
      const int s = round - reduce_rounds;
      requests.push_back(c.isend(chunks_.of(data_, r - s), right, tag_));
      requests.push_back(c.irecv(chunks_.of(data_, r - s - 1), left, tag_));
      return true;
    }
    return false;
  }

  void finish() override {
    const int r = user_.rank();
    if (kind_ == Ring::kReduceScatter) {
      user_.copy_local(out_, chunks_.of(data_, r));
      if (op_ == ReduceOp::kAvg) user_.divide_local(out_, user_.size());
    } else if (kind_ == Ring::kAllreduce && op_ == ReduceOp::kAvg) {
      user_.divide_local(data_, user_.size());
    }
  }

 private:
  Comm& user_;
  Ring kind_;
  std::span<T> data_, out_;
  ReduceOp op_;
  Chunks chunks_;
  int tag_;
};

template <class T>
PendingCollective start(Comm& comm, Ring kind, std::span<T> data, std::span<T> out, ReduceOp op) {
  auto schedule = std::make_unique<RingSchedule<T>>(comm, kind, data, out, op);
  schedule->start();
  return PendingCollective(std::move(schedule));
}

void check_ring(const Comm& comm, const char* what, bool ring, std::string_view algo) {
  DTW_CHECK_ARG(ring, "rank " << comm.rank() << ": " << what << " with algorithm '" << algo
                              << "': only the ring has a non-blocking form");
}

template <class T>
void announce(Comm& comm, const char* name, std::int64_t count, int op) {
  comm.verify_collective({.name = name, .count = count, .type = data_type_of<T>(), .op = op, .root = -1});
}

}  // namespace

template <NumericElement T>
PendingCollective iallreduce(Comm& comm, std::span<T> data, ReduceOp op, AllreduceAlgo algo) {
  check_ring(comm, "iallreduce", algo == AllreduceAlgo::kRing, name_of(algo));
  detail::check_op(comm, "iallreduce", op);
  announce<T>(comm, "iallreduce:ring", std::ssize(data), static_cast<int>(op));
  return start<T>(comm, Ring::kAllreduce, data, {}, op);
}

template <NumericElement T>
PendingCollective ireduce_scatter(Comm& comm, std::span<T> data, std::span<T> out, ReduceOp op,
                                  ReduceScatterAlgo algo) {
  check_ring(comm, "ireduce_scatter", algo == ReduceScatterAlgo::kRing, name_of(algo));
  detail::check_op(comm, "ireduce_scatter", op);
  announce<T>(comm, "ireduce_scatter:ring", std::ssize(data), static_cast<int>(op));
  const std::int64_t mine = Chunks(std::ssize(data), comm.size()).size(comm.rank());
  DTW_CHECK_ARG(std::ssize(out) == mine,
                "rank " << comm.rank() << ": ireduce_scatter of " << data.size() << " elements over "
                        << comm.size() << " ranks: out has " << out.size()
                        << " elements, expected this rank's chunk of " << mine);
  return start<T>(comm, Ring::kReduceScatter, data, out, op);
}

template <NumericElement T>
PendingCollective iallgather(Comm& comm, std::span<const T> in, std::span<T> out,
                             AllgatherAlgo algo) {
  check_ring(comm, "iallgather", algo == AllgatherAlgo::kRing, name_of(algo));
  announce<T>(comm, "iallgather:ring", std::ssize(in), -1);
  const int p = comm.size();
  const std::int64_t m = std::ssize(in);
  DTW_CHECK_ARG(std::ssize(out) == p * m,
                "rank " << comm.rank() << ": iallgather: out has " << out.size()
                        << " elements, expected p * in = " << p << " * " << m << " = " << p * m);
  // p equal blocks of m, as in the blocking allgather; ours goes in first.
  comm.copy_local(Chunks(p * m, p).of(out, comm.rank()), in);
  return start<T>(comm, Ring::kAllgather, out, {}, ReduceOp::kSum);
}

// The in-place form is the same schedule without the copy: the ring walks any
// Chunks layout (each message carries its own chunk's size), so uneven chunks
// need nothing more -- as in the blocking allgather_in_place.
template <NumericElement T>
PendingCollective iallgather_in_place(Comm& comm, std::span<T> data, AllgatherAlgo algo) {
  check_ring(comm, "iallgather_in_place", algo == AllgatherAlgo::kRing, name_of(algo));
  announce<T>(comm, "iallgather_in_place:ring", std::ssize(data), -1);
  return start<T>(comm, Ring::kAllgather, data, {}, ReduceOp::kSum);
}

#define DTW_INSTANTIATE(T)                                                                          \
  template PendingCollective iallreduce<T>(Comm&, std::span<T>, ReduceOp, AllreduceAlgo);           \
  template PendingCollective ireduce_scatter<T>(Comm&, std::span<T>, std::span<T>, ReduceOp,        \
                                                ReduceScatterAlgo);                                 \
  template PendingCollective iallgather<T>(Comm&, std::span<const T>, std::span<T>, AllgatherAlgo); \
  template PendingCollective iallgather_in_place<T>(Comm&, std::span<T>, AllgatherAlgo);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01
