// The threads backend's check before launch: does a world of p rank threads
// (or rank fibers), with the data each rank says it holds, fit in this
// machine's memory, address space, thread and memory-map limits?
#include "dtw/world_fit.h"

#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dtw/errors.h"
#include "dtw/traffic.h"
#include "threads/fibers.h"

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

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

// Saturating arithmetic on byte counts (both >= 0): a world of 2^31 ranks of
// an exabyte each says "8.0 EiB", not a negative number.
std::int64_t add(std::int64_t a, std::int64_t b) { return a > kMax - b ? kMax : a + b; }
std::int64_t times(std::int64_t n, std::int64_t bytes) {
  return n != 0 && bytes > kMax / n ? kMax : n * bytes;
}

// The stack a std::thread gets: the C library's default (`ulimit -s`, or its
// own when that is unlimited), reserved whole in the address space.
std::int64_t thread_stack_bytes() {
  std::size_t size = 8 << 20;
  pthread_attr_t attr;
  if (pthread_getattr_default_np(&attr) == 0) {
    pthread_attr_getstacksize(&attr, &size);
    pthread_attr_destroy(&attr);
  }
  return static_cast<std::int64_t>(size);
}

// "100 MiB", "4.1 GiB": one decimal below 10 units, whole units from there.
std::string human(std::int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  auto value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  if (unit == 0) return fmt::format("{} B", bytes);
  return value < 10 ? fmt::format("{:.1f} {}", value, kUnits[unit])
                    : fmt::format("{:.0f} {}", value, kUnits[unit]);
}

const char* ranks_of(int fiber_workers) {
  return fiber_workers > 0 ? " rank fibers" : " rank threads";
}

}  // namespace

WorldNeeds threads_world_needs(int ranks, int fiber_workers, std::int64_t bytes_per_rank) {
  const std::int64_t p = ranks;
  WorldNeeds needs;
  // Per rank: its own pages, then for each peer it talks to its counters'
  // entry and the report's entry of the link, then its data.
  constexpr auto kPerPeer = static_cast<std::int64_t>(sizeof(PeerTraffic) + sizeof(Link));
  const bool fibers = fiber_workers > 0;
  const std::int64_t own = fibers ? kBytesPerFiberRank : kBytesPerRank;
  needs.data_bytes = times(p, bytes_per_rank);
  needs.bytes = add(p * (own + kPeersPerRank * kPerPeer), needs.data_bytes);
  // A stack takes its whole size of address space, touched or not (a fiber's
  // guard page is mapped beside it). The C library's malloc arenas (64 MiB
  // each, one per allocating thread up to 8 per core) are not counted: when
  // the limit refuses a new one, malloc shares an existing arena instead.
  const std::int64_t stack =
      fibers ? static_cast<std::int64_t>(threads::kFiberStackBytes) + 4096 : thread_stack_bytes();
  needs.address_space = add(times(p, stack), needs.data_bytes);
  needs.threads = fibers ? fiber_workers : p;
  needs.memory_maps = 2 * p;  // a stack and its guard page, thread or fiber
  return needs;
}

std::string describe_world_estimate(int ranks, int fiber_workers, std::int64_t bytes_per_rank) {
  const WorldNeeds needs = threads_world_needs(ranks, fiber_workers, bytes_per_rank);
  const std::string data =
      bytes_per_rank > 0
          ? fmt::format("of which {} the data each rank said it holds, "
                        "LaunchOptions::bytes_per_rank",
                        human(bytes_per_rank))
          : std::string("none of it data: LaunchOptions::bytes_per_rank, the data a rank holds, "
                        "was not given");
  return fmt::format("a world of {}{}, estimated at {} ({} a rank, {})", ranks,
                     ranks_of(fiber_workers), human(needs.bytes),
                     human(needs.bytes / std::max(ranks, 1)), data);
}

MachineRoom machine_room() {
  MachineRoom room;
  const std::int64_t available_kib = read_proc_number("/proc/meminfo", "MemAvailable:");
  if (available_kib >= 0) room.bytes_available = available_kib * 1024;
  // Address space: `ulimit -v` less what the process has mapped already.
  rlimit as{};
  const std::int64_t mapped_kib = read_proc_number("/proc/self/status", "VmSize:");
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY && mapped_kib >= 0)
    room.address_space_left =
        std::max<std::int64_t>(0, static_cast<std::int64_t>(as.rlim_cur) - mapped_kib * 1024);
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

void check_threads_world_fits(int ranks, const MachineRoom& room, int fiber_workers,
                              std::int64_t bytes_per_rank) {
  const WorldNeeds needs = threads_world_needs(ranks, fiber_workers, bytes_per_rank);
  const char* what = ranks_of(fiber_workers);
  const std::string data =
      bytes_per_rank > 0 ? fmt::format(", of which {} its data", human(bytes_per_rank)) : "";
  const std::string less = bytes_per_rank > 0 ? "use fewer ranks or less data a rank"
                                              : "use fewer ranks";
  DTW_CHECK(room.bytes_available < 0 || needs.bytes <= room.bytes_available, OutOfMemory,
            "launch: a world of " << ranks << what << " needs about " << human(needs.bytes) << " ("
                                  << human(needs.bytes / ranks) << " a rank" << data
                                  << "), but this machine has " << human(room.bytes_available)
                                  << " available (MemAvailable): " << less
                                  << ", or the mpi backend across machines");
  DTW_CHECK(room.address_space_left < 0 || needs.address_space <= room.address_space_left,
            OutOfMemory,
            "launch: a world of " << ranks << what << " needs about " << human(needs.address_space)
                                  << " of address space (" << human(needs.address_space / ranks)
                                  << " a rank: its stack's whole reservation" << data
                                  << "), but the address-space limit (`ulimit -v`, RLIMIT_AS) "
                                     "leaves "
                                  << human(room.address_space_left) << ": " << less
                                  << ", or raise the limit");
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

std::string stack_limits_hint(const MachineRoom& room) {
  std::vector<std::string> limits;
  if (room.address_space_left >= 0)
    limits.push_back(fmt::format("the address-space limit (`ulimit -v`, {} left)",
                                 human(room.address_space_left)));
  if (room.memory_maps_left >= 0)
    limits.push_back(fmt::format("vm.max_map_count ({} maps left)", room.memory_maps_left));
  if (room.threads_left >= 0)
    limits.push_back(fmt::format("the thread limits (kernel.threads-max, `ulimit -u`: {} threads "
                                 "left)",
                                 room.threads_left));
  if (room.bytes_available >= 0)
    limits.push_back(fmt::format("the memory ({} available)", human(room.bytes_available)));
  if (limits.empty()) return "the machine's limits";
  std::string out = limits[0];
  for (std::size_t i = 1; i < limits.size(); ++i)
    out += (i + 1 == limits.size() ? " or " : ", ") + limits[i];
  return out;
}

}  // namespace dtw
