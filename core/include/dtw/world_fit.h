#pragma once
/// @file
/// Whether a world of rank threads (or rank fibers, RankMode) fits this
/// machine, checked before the threads backend starts one, so a world too large for the machine is
/// refused with the need and the room in numbers instead of failing halfway
/// with the system's `Resource temporarily unavailable` or `std::bad_alloc`.
#include <cstdint>
#include <string>

namespace dtw {

/// What a threads-backend world of some number of ranks takes from the machine.
struct WorldNeeds {
  /// Memory, estimated: per rank its stack's touched pages and its book-keeping,
  /// and the traffic counters of a few peers (its own entry per peer and the
  /// report's per link, traffic.h). It grows linearly with the ranks; a rank
  /// function that talks to every peer (an all-to-all) adds about 64 bytes a
  /// link used, p(p−1) links, which this estimate does not include. A fiber
  /// needs less than a thread (about 32 KiB a rank against 128 KiB): its
  /// stack, like a thread's, is backed only where touched, and it has no
  /// kernel thread or per-thread C library area.
  std::int64_t bytes = 0;
  /// One thread per rank; in fiber mode only the worker threads.
  std::int64_t threads = 0;
  /// Memory maps: a thread's or a fiber's stack and its guard page are two.
  std::int64_t memory_maps = 0;
};

/// What this machine has left for a launch; -1 where it cannot be read.
struct MachineRoom {
  std::int64_t bytes_available = -1;   ///< MemAvailable of /proc/meminfo
  std::int64_t threads_left = -1;      ///< the thread limits less the process's threads
  std::int64_t memory_maps_left = -1;  ///< vm.max_map_count less the process's maps
};

/// The estimate for a world of `ranks` rank threads, or (`fiber_workers` > 0)
/// of `ranks` rank fibers run by that many worker threads (RankMode::kFibers).
WorldNeeds threads_world_needs(int ranks, int fiber_workers = 0);

/// This machine's room now (Linux /proc; -1 fields elsewhere).
MachineRoom machine_room();

/// Throws OutOfMemory, naming the world size, what it needs and what `room`
/// has, when a world of `ranks` rank threads (`fiber_workers` > 0: rank fibers
/// on that many workers) cannot fit; a -1 field of `room` is not checked.
void check_threads_world_fits(int ranks, const MachineRoom& room, int fiber_workers = 0);

}  // namespace dtw
