// The threads backend's check before launch: does a world of p rank threads
// (or rank fibers) fit in this machine's memory and thread limits?
#include "dtw/world_fit.h"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "dtw/errors.h"
#include "dtw/traffic.h"

namespace dtw {
namespace {

// Measured: `dtw run token-ring --ranks P` peaks at 110 MiB for 1024 ranks,
// 455 MiB for 4096 (docs/results/threads_at_scale.md): about 115 KiB a rank
// for a rank thread's stack pages, its tracer, ledger and communicator. The
// estimate rounds that up.
constexpr std::int64_t kBytesPerRank = 128 << 10;
// As fibers the same demo peaks at 21 MiB for 1024 ranks, 100 MiB for 4096:
// about 22 KiB a rank. A fiber's stack is backed only where touched, like a
// thread's, but the kernel's thread and the C library's per-thread area are
// gone. Rounded up.
constexpr std::int64_t kBytesPerFiberRank = 32 << 10;
// The traffic counters are sparse (traffic.h): a rank's entry per peer it
// talks to and the report's entry per link used. How many is up to the rank
// function, unknown before launch; the estimate allows this many peers a rank
// (a ring uses 2, a binomial tree about log2 p). An all-to-all uses p − 1,
// which the estimate does not foresee.
constexpr std::int64_t kPeersPerRank = 16;
// The process's own threads and maps, and a margin for what libraries add.
constexpr std::int64_t kMargin = 64;

// A number from a /proc file: the first field after `key` (or the file's
// first number when `key` is empty); -1 when it cannot be read.
std::int64_t read_proc_number(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!key.empty() && line.rfind(key, 0) != 0) continue;
    std::istringstream fields(key.empty() ? line : line.substr(key.size()));
    std::int64_t value = -1;
    if (fields >> value) return value;
    return -1;
  }
  return -1;
}

std::int64_t count_lines(const char* path) {
  std::ifstream in(path);
  if (!in) return -1;
  std::int64_t n = 0;
  std::string line;
  while (std::getline(in, line)) ++n;
  return n;
}

std::string mib(std::int64_t bytes) {
  std::ostringstream s;
  s << (bytes + (1 << 20) - 1) / (1 << 20) << " MiB";
  return s.str();
}

}  // namespace

WorldNeeds threads_world_needs(int ranks, int fiber_workers) {
  const std::int64_t p = ranks;
  WorldNeeds needs;
  // Per rank: its own pages, then for each peer it talks to its counters'
  // entry and the report's entry of the link.
  constexpr auto kPerPeer = static_cast<std::int64_t>(sizeof(PeerTraffic) + sizeof(Link));
  const std::int64_t own = fiber_workers > 0 ? kBytesPerFiberRank : kBytesPerRank;
  needs.bytes = p * (own + kPeersPerRank * kPerPeer);
  needs.threads = fiber_workers > 0 ? fiber_workers : p;
  needs.memory_maps = 2 * p;  // a stack and its guard page, thread or fiber
  return needs;
}

MachineRoom machine_room() {
  MachineRoom room;
  const std::int64_t available_kib = read_proc_number("/proc/meminfo", "MemAvailable:");
  if (available_kib >= 0) room.bytes_available = available_kib * 1024;
  // Threads: the system-wide limit and this user's (RLIMIT_NPROC counts every
  // thread of the user; only this process's are known, hence the margin).
  std::int64_t limit = read_proc_number("/proc/sys/kernel/threads-max", "");
  rlimit nproc{};
  if (getrlimit(RLIMIT_NPROC, &nproc) == 0 && nproc.rlim_cur != RLIM_INFINITY) {
    const auto user = static_cast<std::int64_t>(nproc.rlim_cur);
    limit = limit < 0 ? user : std::min(limit, user);
  }
  const std::int64_t mine = read_proc_number("/proc/self/status", "Threads:");
  if (limit >= 0) room.threads_left = limit - std::max<std::int64_t>(mine, 1) - kMargin;
  const std::int64_t max_maps = read_proc_number("/proc/sys/vm/max_map_count", "");
  const std::int64_t maps = count_lines("/proc/self/maps");
  if (max_maps >= 0 && maps >= 0) room.memory_maps_left = max_maps - maps - kMargin;
  return room;
}

void check_threads_world_fits(int ranks, const MachineRoom& room, int fiber_workers) {
  const WorldNeeds needs = threads_world_needs(ranks, fiber_workers);
  const char* what = fiber_workers > 0 ? " rank fibers" : " rank threads";
  DTW_CHECK(room.bytes_available < 0 || needs.bytes <= room.bytes_available, OutOfMemory,
            "launch: a world of " << ranks << what << " needs about " << mib(needs.bytes)
                                  << " (" << mib(needs.bytes / ranks)
                                  << " a rank), but this machine has " << mib(room.bytes_available)
                                  << " available: use fewer ranks, or the mpi backend across "
                                     "machines");
  DTW_CHECK(room.threads_left < 0 || needs.threads <= room.threads_left, OutOfMemory,
            "launch: a world of " << ranks << what << " needs " << needs.threads
                                  << " threads, but this process may start only "
                                  << room.threads_left
                                  << " more (kernel.threads-max and `ulimit -u`): use fewer "
                                     "ranks or raise the limit");
  DTW_CHECK(room.memory_maps_left < 0 || needs.memory_maps <= room.memory_maps_left, OutOfMemory,
            "launch: a world of " << ranks << what << " needs " << needs.memory_maps
                                  << " memory maps (a stack and its guard page each), but "
                                     "vm.max_map_count leaves "
                                  << room.memory_maps_left
                                  << ": use fewer ranks or raise vm.max_map_count");
}

}  // namespace dtw
