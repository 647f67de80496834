#pragma once
/// @file
/// Whether a world of rank threads (or rank fibers, RankMode) fits this
/// machine, checked before the threads backend starts one, so a world too
/// large for the machine is refused with the need, the room and the limit
/// that refused it, in numbers, instead of failing halfway with the system's
/// `Resource temporarily unavailable` or `std::bad_alloc`.
///
/// The launch checks a world of 64 ranks or more, and any world whose ranks
/// declare the data they hold (LaunchOptions::bytes_per_rank > 0).
#include <cstdint>
#include <string>

namespace dtw {

/// What a threads-backend world of some number of ranks takes from the machine.
struct WorldNeeds {
  /// Memory, estimated: per rank its stack's touched pages and its
  /// book-keeping, the traffic counters of a few peers (its own entry per peer
  /// and the report's per link, traffic.h), and the data the caller says it
  /// holds (LaunchOptions::bytes_per_rank). It grows linearly with the ranks;
  /// a rank function that talks to every peer (an all-to-all) adds about 64
  /// bytes a link used, p(p−1) links, which this estimate does not include. A
  /// fiber needs less than a thread (about 32 KiB a rank against 128 KiB): its
  /// stack, like a thread's, is backed only where touched, and it has no
  /// kernel thread or per-thread C library area. Saturates at INT64_MAX.
  std::int64_t bytes = 0;
  /// The part of `bytes` that is the ranks' own data (bytes_per_rank × ranks).
  std::int64_t data_bytes = 0;
  /// Address space, which `ulimit -v` (RLIMIT_AS) bounds: every stack's whole
  /// reservation (a thread's default stack size, 1 MiB a fiber), touched or
  /// not, the ranks' data, and the C library's malloc arenas (64 MiB each, up
  /// to 8 per core, one per thread that allocates). Saturates at INT64_MAX.
  std::int64_t address_space = 0;
  /// One thread per rank; in fiber mode only the worker threads.
  std::int64_t threads = 0;
  /// Memory maps: a thread's or a fiber's stack and its guard page are two.
  std::int64_t memory_maps = 0;
};

/// What this machine has left for a launch; -1 where it cannot be read or
/// there is no limit.
struct MachineRoom {
  std::int64_t bytes_available = -1;     ///< MemAvailable of /proc/meminfo
  std::int64_t address_space_left = -1;  ///< RLIMIT_AS (`ulimit -v`) less the process's VmSize
  std::int64_t threads_left = -1;        ///< the thread limits less the process's threads
  std::int64_t memory_maps_left = -1;    ///< vm.max_map_count less the process's maps
};

/// The estimate for a world of `ranks` rank threads, or (`fiber_workers` > 0)
/// of `ranks` rank fibers run by that many worker threads (RankMode::kFibers),
/// each rank holding `bytes_per_rank` bytes of its own data.
WorldNeeds threads_world_needs(int ranks, int fiber_workers = 0, std::int64_t bytes_per_rank = 0);

/// This machine's room now (Linux /proc and getrlimit; -1 fields elsewhere).
MachineRoom machine_room();

/// Throws OutOfMemory, naming the world size, what it needs, what `room` has
/// and the limit that refused it (the available memory, `ulimit -v`, the
/// thread limits or vm.max_map_count), when a world of `ranks` rank threads
/// (`fiber_workers` > 0: rank fibers on that many workers), each holding
/// `bytes_per_rank` bytes of data, cannot fit; a -1 field of `room` is not
/// checked.
void check_threads_world_fits(int ranks, const MachineRoom& room, int fiber_workers = 0,
                              std::int64_t bytes_per_rank = 0);

/// The estimate in words, for a rank's out-of-memory report: "a world of 4096
/// rank fibers, estimated at 4.1 GiB (1.0 MiB a rank, of which 1.0 MiB the
/// data each rank said it holds, LaunchOptions::bytes_per_rank)".
std::string describe_world_estimate(int ranks, int fiber_workers = 0,
                                    std::int64_t bytes_per_rank = 0);

/// Which of `room`'s limits a failure to map a stack or start a thread can
/// come from, for the launch's message when the machine refuses one that the
/// estimate let through: "the address-space limit (`ulimit -v`, 2.0 GiB left)
/// or vm.max_map_count (65466 maps left)".
std::string stack_limits_hint(const MachineRoom& room);

}  // namespace dtw
