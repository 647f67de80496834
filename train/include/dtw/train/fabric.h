#pragma once
/// @file
/// The modeled fabric: a run's trace replayed on a named cluster, so a learner
/// on two cores sees DDP's overlap and GPipe's bubble as they would be on
/// GPUs, and benchmarks state results that do not depend on this machine.
///
/// Replay rules. Each rank's compute phases and communication calls keep
/// their order. A compute phase takes flops / (the device's sustained matmul
/// FLOP/s) + bytes / (its memory bandwidth) — its recorded work, not its
/// measured time — except on `this-machine`, which keeps measured durations.
/// A message starts when both its send and its receive are posted (sends are
/// synchronous, as on every dtw backend) and takes α + n·β of the link it
/// crosses: intra-node between ranks on one node (ranks_per_node consecutive
/// ranks), inter-node otherwise; a recv_reduce adds 3n bytes of memory traffic
/// for the reduction. Sends and receives pair in posting order per (source,
/// destination, tag, collective channel or not). A call posted inside a
/// compute phase is posted at the same share of the modeled phase as the
/// share of the phase's work its rank had done (the trace's work clock,
/// TraceEvent::work_start: backward's gradient hooks land where a device
/// would reach them, whatever this machine's forward and backward took) —
/// of its measured time on `this-machine` or without a work clock — but
/// never before the modeled completion of a call of its rank that the host
/// had seen complete when it posted; a non-blocking call that completed
/// inside a compute phase is waited for at the end of that phase.
///
/// Collectives on a device (Cluster::device_progress). A collective runs in
/// rounds on its communicator's collective channel, all under one tag (its
/// number there). On the CPU backends a rank posts the next round only when
/// its own thread calls test() or wait() and finds the last round complete,
/// so the host's trace puts later rounds wherever the rank happened to poll.
/// A GPU does not wait for the host: NCCL's kernels, once launched, start
/// each round the moment the previous one has arrived, and the collectives
/// of one communicator run one after another on its stream. So on a device
/// cluster a collective starts where the host started it (the rules above)
/// or when the collective before it on the same channel and rank has
/// completed, whichever is later; and every later message of the same
/// collective (same rank, channel and tag) at the modeled completion of the
/// messages of that collective the host had seen complete before posting it
/// — not at the host's poll. On `this-machine` the host's polls are the
/// truth and later rounds keep them.
///
/// Not modeled: link contention, the runtime's internal messages (barriers,
/// reference collectives) and work outside compute phases.

#include <string>
#include <string_view>
#include <vector>

#include "dtw/trace.h"
#include "dtw/train/timeline.h"

namespace dtw::train {

/// α + n·β: one kind of link.
struct Link {
  double alpha = 0;  ///< seconds per message
  double beta = 0;   ///< seconds per byte (1/bandwidth)
  /// Seconds for a message of `bytes`.
  double seconds(double bytes) const { return alpha + bytes * beta; }
};

/// A named cluster: a device model and a network.
struct Cluster {
  std::string name;         ///< what --fabric takes
  std::string description;  ///< one line
  std::string sources;      ///< where the numbers come from
  int ranks_per_node = 8;   ///< consecutive ranks sharing a node
  Link intra;               ///< between ranks of one node
  Link inter;               ///< between nodes
  double flops = 0;         ///< sustained matmul FLOP/s per device
  double memory_bw = 0;     ///< sustained memory bandwidth per device, bytes/s
  bool measured_compute = false;  ///< keep measured compute durations (this-machine)
  /// A collective's later rounds start when the previous round arrives, not
  /// when the host polls (true for the GPU clusters; see the replay rules).
  bool device_progress = true;
  /// The link between ranks a and b.
  const Link& link(int a, int b) const {
    return a / ranks_per_node == b / ranks_per_node ? intra : inter;
  }
};

/// The named GPU clusters: "pcie-8", "nvlink-8", "ib-2x8", "ib-4x8", and
/// "ideal-8", nvlink-8's devices with free messages (a schedule by itself).
const std::vector<Cluster>& gpu_clusters();
/// This machine: measured compute, one link fitted by chapter 00's ping-pong
/// (α, β) for every pair of ranks, `memory_bw` for reductions.
Cluster this_machine(double alpha, double beta, double memory_bw);
/// The GPU cluster called `name`; InvalidArgument listing the names (and
/// this-machine, which the caller builds with this_machine()).
const Cluster& find_gpu_cluster(std::string_view name);

/// A trace as it would run on a cluster.
struct Replay {
  std::vector<TraceEvent> events;  ///< compute and comm events with modeled times (µs)
  Timeline timeline;               ///< their figures
  double seconds = 0;              ///< modeled span
  int unmodeled = 0;   ///< compute phases without FLOPs or bytes (0 s on a device model)
  int unmatched = 0;   ///< communication calls without a partner in the trace
};

/// Replays `trace` (a Report's, world `world`) on `cluster`. A trace whose
/// calls cannot complete raises InvalidArgument naming a rank and what it
/// waits for.
Replay replay_on(const std::vector<TraceEvent>& trace, int world, const Cluster& cluster);

}  // namespace dtw::train
