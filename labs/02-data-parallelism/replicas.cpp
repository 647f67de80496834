// Replicas that agree: every rank starts from the same parameters, and the
// workbench checks, cheaply and often, that they stay the same.
//
// Data parallelism 1.1 keeps p copies of the model and of its optimizer
// state and never sends a parameter after the start. Every rank applies the
// same summed gradient with the same optimizer, so the copies stay equal bit
// for bit -- as long as nothing goes wrong. When something does (a rank that
// skipped a synchronisation, one that started from other weights, an
// optimizer state restored on one rank only), nothing fails: each replica
// trains on happily, the ranks' models drift apart, and the loss rank 0
// prints is that of one of p different models. The seeds call it "optimizer
// state divergence"; it can go unnoticed for days.
//
// The cure is a fingerprint: one 64-bit hash per tensor, compared across the
// ranks every few steps. Hashing Ψ values costs a pass over memory (less than
// the optimizer's step); the exchange is p·(tensors) hashes. Because equal
// replicas are equal *bitwise* (the ring's allgather copies the same sums to
// everyone), the hashes must be equal too, and the first rank and tensor that
// differ are named the step it happens:
//
//     rank 0: wte 1f3a.. h.0.ln1.gamma 77c0.. h.0.attn.qkv.weight 9e21.. ...
//     rank 1: wte 1f3a.. h.0.ln1.gamma 77c0.. h.0.attn.qkv.weight 9e21.. ...
//     rank 2: wte 1f3a.. h.0.ln1.gamma 77c0.. h.0.attn.qkv.weight 4b08..   <- named
//
// The hashes travel on the runtime's own channel (allgather_results): they
// are the workbench checking the training, not part of it, so the traffic
// matrix and the byte counts show the training's messages only.
#include <cstring>
#include <sstream>

#include "collectives.h"  // chapter 01's solution (DEPENDS 01)
#include "data_parallelism.h"
#include "dtw/kernels/vector.h"
#include "dtw/results.h"

namespace dtw::ch02 {
namespace {

// SplitMix64's finaliser: every input bit reaches every output bit.
std::uint64_t mix(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// "0x1f3a..." for a message.
std::string hex(std::uint64_t h) {
  std::ostringstream s;
  s << "0x" << std::hex << h;
  return s.str();
}

// "at the start", "after 1 step" or "after 3 steps".
std::string when(std::int64_t steps_done) {
  if (steps_done == 0) return "at the start";
  return "after " + std::to_string(steps_done) + (steps_done == 1 ? " step" : " steps");
}

}  // namespace

template <TrainElement T>
std::vector<std::uint64_t> fingerprint(const model::ParamLayout& layout,
                                       std::span<const T> params) {
  DTW_CHECK_ARG(static_cast<std::int64_t>(params.size()) == layout.size(),
                "fingerprint: " << params.size() << " parameters for a model of " << layout.size());
  std::vector<std::uint64_t> hashes;
  hashes.reserve(layout.views().size());
  DTW_TODO("02.2: One 64-bit hash per tensor, in layout order, of the bits of its parameters.");
  return hashes;
}

template <TrainElement T>
void check_replicas(Comm& comm, const model::ParamLayout& layout, std::span<const T> params,
                    std::int64_t steps_done) {
  // The parameters live where the rank works: on a GPU (LaunchOptions::device
  // "cuda") the hashes are taken of a host copy.
  std::vector<T> copy;
  if (!comm.exec().is_host()) copy = kernels::to_host(comm.exec().place(), params);
  const std::vector<std::uint64_t> mine =
      fingerprint(layout, copy.empty() ? params : std::span<const T>(copy));
  // Every rank gets every rank's hashes, so every rank reaches the same
  // verdict and throws the same error: no rank is left waiting for another.
  const std::vector<std::vector<std::uint64_t>> all = allgather_results(comm, mine);
  DTW_TODO("02.2: Compare every rank's hashes with rank 0's; at the first difference throw ReplicasDiverged naming the step, the rank, the tensor and both fingerprints.");
}

void check_same_run(Comm& comm, const train::RunSpec& spec) {
  const std::string mine = spec.describe();
  const std::vector<std::string> all = allgather_results(comm, mine);
  for (std::size_t q = 1; q < all.size(); ++q) {
    if (all[q] == all[0]) continue;
    // The first word that differs, with the word before it (its field name).
    std::istringstream a(all[0]), b(all[q]);
    std::string wa, wb, field = "model";
    while ((a >> wa) && (b >> wb) && wa == wb) field = wa;
    DTW_CHECK_ARG(false, "rank " << comm.rank() << ": ranks 0 and " << q
                                 << " would train different runs: rank " << q << " has " << field
                                 << " '" << wb << "' where rank 0 has '" << wa
                                 << "' (every data-parallel rank must train the same model"
                                 << " on the same run)");
  }
}

template <TrainElement T>
void broadcast_parameters(Comm& comm, train::Replica<T>& replica) {
  // Every replica initialises from the run's seed already, so here the
  // broadcast only confirms what the ranks have. It is still how every
  // framework starts (PyTorch's DDP broadcasts rank 0's module state in its
  // constructor, Horovod asks for broadcast_parameters): processes that do
  // not share a seed, or that load a checkpoint on rank 0 only, start apart.
  DTW_TODO("02.2: Give every rank rank 0's initial parameters with chapter 01's broadcast.");
  check_replicas<T>(comm, replica.layout(), replica.params(), 0);
}

#define DTW_CH02_INSTANTIATE(T)                                                         \
  template std::vector<std::uint64_t> fingerprint<T>(const model::ParamLayout&,         \
                                                     std::span<const T>);               \
  template void check_replicas<T>(Comm&, const model::ParamLayout&, std::span<const T>, \
                                  std::int64_t);                                        \
  template void broadcast_parameters<T>(Comm&, train::Replica<T>&);
DTW_CH02_INSTANTIATE(float)
DTW_CH02_INSTANTIATE(double)
#undef DTW_CH02_INSTANTIATE

}  // namespace dtw::ch02
