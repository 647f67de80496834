// Roles and shards: who is a server, who is a worker, and which contiguous
// range of the flat parameter buffer each server owns.
//
// Why shard at all? With one server, every worker pulls all Ψ parameters
// from it and pushes all Ψ gradients to it, every step: the server's link
// carries 2·W·Ψ values per step while each worker's carries 2·Ψ. That is the
// O(W) bottleneck of the seeds' "Data Parallelism 1.0". Cut the buffer into S
// shards on S servers and each worker talks to all of them, a shard each:
// server s's link carries 2·W·Ψ/S, the busiest link shrinks S-fold, and with
// S = W (a server beside every worker) it carries 2·Ψ — the bytes a ring
// allreduce puts on every link, up to the factor (p−1)/p. A sharded PS *is* a
// reduce-scatter (the pushes: each server ends with the sum of its shard)
// followed by an allgather (the pulls), done through the servers' links.
//
//   S = 2, W = 3, Ψ = 10:   server 0 owns [0, 5)   server 1 owns [5, 10)
//
//        server 0 ──[0,5)──► worker 0, 1, 2 ◄──[5,10)── server 1     (pull)
//        server 0 ◄──g[0,5)── worker 0, 1, 2 ──g[5,10)──► server 1   (push)
//
// Clipping needs the norm of the whole gradient, but each server holds only
// its shard's: the servers add their Σ g² with an allreduce among themselves
// (8 bytes, off the workers' links) and then each clips its shard by the same
// global norm, exactly as the single device does.
//
// (The chapter text's "Check yourself" asks about both halves of this file.)
#include <cmath>
#include <span>
#include <string>

#include "collectives.h"  // chapter 01's solution (DEPENDS 01)
#include "dtw/errors.h"
#include "parameter_server.h"

namespace dtw::ch03 {

PsLayout ps_layout(int world, std::int64_t model_size, const PsOptions& options) {
  PsLayout layout;
  layout.servers = options.servers;
  layout.workers = options.workers > 0 ? options.workers : world - options.servers;
  DTW_CHECK_ARG(layout.servers >= 1, "ps: " << layout.servers << " servers: need at least one");
  DTW_CHECK_ARG(layout.workers >= 1, "ps: a world of " << world << " ranks with " << layout.servers
                                                       << " servers leaves no worker");
  DTW_CHECK_ARG(layout.servers + layout.workers == world,
                "ps: " << layout.servers << " servers + " << layout.workers << " workers = "
                       << layout.servers + layout.workers << " ranks, but the world has " << world);
  // A knob naming a worker the world does not have would change nothing: refused.
  const auto no_worker = [&](const char* knob, int w) {
    const std::string s = std::to_string(layout.servers), p = std::to_string(world);
    return "ps: " + std::string(knob) + " names worker " + std::to_string(w) + ", but a world of " +
           p + " ranks with " + s + " server(s) has " + std::to_string(layout.workers) +
           " workers (0 ... " + std::to_string(layout.workers - 1) + ", ranks " + s + " ... " +
           std::to_string(world - 1) + ")";
  };
  // slowdown ends at the highest worker a straggler= item names.
  const int highest = static_cast<int>(options.slowdown.size()) - 1;
  DTW_CHECK_ARG(highest < layout.workers, no_worker("straggler", highest));
  DTW_CHECK_ARG(options.crash_worker < layout.workers, no_worker("crash", options.crash_worker));

  if (!options.ranges.empty()) {
    // Shards given by hand: they must tile [0, Ψ) exactly, one per server.
    DTW_CHECK_ARG(static_cast<int>(options.ranges.size()) == layout.servers,
                  "ps: " << options.ranges.size() << " ranges for " << layout.servers << " servers");
    std::int64_t next = 0;
    for (std::size_t s = 0; s < options.ranges.size(); ++s) {
      const train::Range r = options.ranges[s];
      DTW_CHECK_ARG(r.begin <= next, "ps: parameters [" << next << ", " << r.begin
                                                         << ") are owned by no server (server " << s
                                                         << " starts at " << r.begin << ")");
      DTW_CHECK_ARG(r.begin == next, "ps: server " << s << "'s range [" << r.begin << ", " << r.end
                                                   << ") overlaps the one before, which ends at "
                                                   << next);
      DTW_CHECK_ARG(r.end > r.begin,
                    "ps: server " << s << "'s range [" << r.begin << ", " << r.end << ") is empty");
      next = r.end;
    }
    DTW_CHECK_ARG(next <= model_size, "ps: server ranges end at " << next << ", past the model's "
                                                                  << model_size << " parameters");
    DTW_CHECK_ARG(next == model_size, "ps: parameters [" << next << ", " << model_size
                                                         << ") are owned by no server (the model has "
                                                         << model_size << ")");
    layout.shards = options.ranges;
    return layout;
  }

  if (layout.servers == 1) {
    layout.shards.push_back({0, model_size});  // one server holds the whole model
  } else {
    DTW_CHECK_ARG(model_size >= layout.servers,
                  "ps: " << layout.servers << " servers for " << model_size << " parameters");
    // @lab 03.4: Split [0, model_size) into one contiguous, nearly equal shard per server, the longer ones first.
    // @hint 1: Every parameter belongs to exactly one server, and the servers' shares differ by at
    // @hint 1: most one parameter, so that no server's link carries more than its share. When the
    // @hint 1: parameters do not divide evenly, the first servers take one more each; the shards
    // @hint 1: follow one another in server order, with no gap and no overlap.
    // @hint 2: base = n / S parameters each, and the first n mod S servers one more. Walk a
    // @hint 2: running begin from 0: shard s is [begin, begin + its size), then begin moves to its
    // @hint 2: end. Trap: n / S alone loses the n mod S parameters at the end (no server owns them),
    // @hint 2: and giving the extra ones to the last servers is not the layout the contract names.
    // @hint 3: const std::int64_t base = model_size / layout.servers, longer = model_size %
    // @hint 3: layout.servers; for s in 0 … S−1: size = base + (s < longer ? 1 : 0);
    // @hint 3: layout.shards.push_back({begin, begin + size}); begin += size. (dtw::Chunks(n, S)
    // @hint 3: computes the same offsets and sizes.)
    const std::int64_t base = model_size / layout.servers, longer = model_size % layout.servers;
    std::int64_t begin = 0;
    for (int s = 0; s < layout.servers; ++s) {
      const std::int64_t size = base + (s < longer ? 1 : 0);
      layout.shards.push_back({begin, begin + size});
      begin += size;
    }
    // @end
  }
  return layout;
}

double global_sum_of_squares(Comm& servers, double local) {
  if (servers.size() == 1) return local;  // one server holds the whole gradient
  // @lab 03.4: Return the whole gradient's sum of squares, from every server's sum over its shard.
  // @hint 1: A server holds only its shard's gradient, but clipping scales by the norm of the
  // @hint 1: whole gradient: the servers add up their shards' sums of squares among themselves
  // @hint 1: (nothing crosses the workers' links), and every server gets the same total, so every
  // @hint 1: shard is scaled by the same factor, as on the single device.
  // @hint 2: Squares add over disjoint shards; norms do not. Sum the sums of squares (not the
  // @hint 2: norms, not the largest one, not a mean), over the servers' own communicator, and
  // @hint 2: return the sum of squares itself: the caller's clip takes its square root.
  // @hint 3: double sum = local; ch01::allreduce(servers, std::span<double>(&sum, 1),
  // @hint 3: ReduceOp::kSum); return sum.
  double sum = local;
  ch01::allreduce(servers, std::span<double>(&sum, 1), ReduceOp::kSum);
  return sum;
  // @end
}

}  // namespace dtw::ch03
