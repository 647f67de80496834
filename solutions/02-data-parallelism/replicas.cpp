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
  // @lab 02.2: One 64-bit hash per tensor, in layout order, of the bits of its parameters.
  // @hint 1: Each tensor gets one number that changes when any bit of any of its values changes,
  // @hint 1: and only its own values go into it: equal replicas give equal lists, and the first
  // @hint 1: differing entry names the tensor that diverged.
  // @hint 2: For each view in layout order: h = mix(its size); for every element i of the view,
  // @hint 2: take the bits of params[offset + i] as an unsigned integer and h = mix(h xor bits);
  // @hint 2: append h. Traps: the bits, not the values (-0.0 and 0.0 are different states);
  // @hint 2: index from the view's offset, not from 0; hash every element, not a sample.
  // @hint 3: layout.views(), view.offset, view.size; std::memcpy(&bits, &params[...], sizeof(T))
  // @hint 3: into a std::uint64_t bits = 0; mix(h ^ bits); hashes.push_back(h).
  for (const model::ParamView& view : layout.views()) {
    std::uint64_t h = mix(static_cast<std::uint64_t>(view.size));
    for (std::int64_t i = 0; i < view.size; ++i) {
      std::uint64_t bits = 0;
      std::memcpy(&bits, &params[static_cast<std::size_t>(view.offset + i)], sizeof(T));
      h = mix(h ^ bits);
    }
    hashes.push_back(h);
  }
  // @end
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
  // @lab 02.2: Compare every rank's hashes with rank 0's; at the first difference throw ReplicasDiverged naming the step, the rank, the tensor and both fingerprints.
  // @hint 1: Every rank holds every rank's fingerprint; the first rank (after rank 0) and, in it,
  // @hint 1: the first tensor whose hash differs from rank 0's is the divergence to report, with
  // @hint 1: the step and both hashes, in the contract's sentence: every rank reaches the same
  // @hint 1: verdict, so every rank throws the same error and none is left waiting.
  // @hint 2: for q = 1 .. p-1, for t in layout order: if all[q][t] != all[0][t], throw "rank <me>:
  // @hint 2: replicas diverged <when(steps_done)>: rank <q>'s <tensor name> differs from rank
  // @hint 2: 0's (fingerprint <q's> vs <0's>)". Trap: comparing only some tensors (or one rank
  // @hint 2: with its neighbour) lets a divergence elsewhere through.
  // @hint 3: layout.views()[t].name, hex(hash), when(steps_done), comm.rank(); DTW_CHECK(false,
  // @hint 3: ReplicasDiverged, message).
  for (std::size_t q = 1; q < all.size(); ++q) {
    for (std::size_t t = 0; t < all[0].size(); ++t) {
      if (all[q][t] == all[0][t]) continue;
      DTW_CHECK(false, ReplicasDiverged,
                "rank " << comm.rank() << ": replicas diverged " << when(steps_done) << ": rank "
                        << q << "'s " << layout.views()[t].name << " differs from rank 0's"
                        << " (fingerprint " << hex(all[q][t]) << " vs " << hex(all[0][t])
                        << "; the first differing rank and tensor in layout order)");
    }
  }
  // @end
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
  // @lab 02.2: Give every rank rank 0's initial parameters with chapter 01's broadcast.
  // @hint 1: Every replica must start from the same parameters: rank 0's, whatever the others
  // @hint 1: initialised.
  // @hint 2: One collective call on every rank over the whole parameter buffer, rank 0 the root.
  // @hint 2: Trap: skipping it passes here (same seed) and fails as soon as ranks start apart.
  // @hint 3: ch01::broadcast(comm, replica.params(), /*root=*/0).
  ch01::broadcast(comm, replica.params(), /*root=*/0);
  // @end
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
