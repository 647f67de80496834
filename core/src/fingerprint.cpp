// The collective fingerprint check: before a collective moves any data, every
// rank shares what it is about to call (name, count, type, op, root) with the
// whole group. Ranks that disagree would otherwise hang, or silently combine
// unrelated buffers; here every rank throws the same CollectiveMismatch that
// names who called what. The exchange runs on its own reserved tag, so two
// ranks that entered different collectives still meet in it.
#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "dtw/comm.h"
#include "dtw/errors.h"

namespace dtw {
namespace {

// One rank's call as a fixed-size record sent as raw bytes. Zero-filled
// before use, so the padding of the name compares equal too.
struct Fingerprint {
  char name[40];
  std::int64_t count;
  std::int32_t type;
  std::int32_t op;
  std::int32_t root;
  std::int32_t unused;
};

Fingerprint make_fingerprint(const Comm::CollectiveCall& call) {
  Fingerprint f;
  std::memset(&f, 0, sizeof f);
  if (call.name) std::strncpy(f.name, call.name, sizeof f.name - 1);
  f.count = call.count;
  f.type = static_cast<std::int32_t>(call.type);
  f.op = call.op;
  f.root = call.root;
  return f;
}

bool same_call(const Fingerprint& a, const Fingerprint& b) {
  return std::strncmp(a.name, b.name, sizeof a.name) == 0 && a.count == b.count &&
         a.type == b.type && a.op == b.op && a.root == b.root;
}

// "allreduce(count 1024, float32, sum)", "broadcast(count 8, int64, root 2)".
std::string describe(const Fingerprint& f) {
  std::ostringstream out;
  out << f.name << "(count " << f.count << ", ";
  if (f.type >= 0 && f.type <= static_cast<int>(DataType::kFloat64)) {
    out << name_of(static_cast<DataType>(f.type));
  } else {
    out << "type " << f.type;
  }
  if (f.op >= 0 && f.op <= static_cast<int>(ReduceOp::kAvg)) {
    out << ", " << name_of(static_cast<ReduceOp>(f.op));
  } else if (f.op >= 0) {
    out << ", op " << f.op;
  }
  if (f.root >= 0 || f.root < -1) out << ", root " << f.root;
  out << ")";
  return out.str();
}

// "rank 2", "ranks 0, 1, 3", "ranks 0-5, 7": runs of three or more collapse.
std::string describe_ranks(const std::vector<int>& ranks) {
  std::ostringstream out;
  out << (ranks.size() == 1 ? "rank " : "ranks ");
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i > 0) out << ", ";
    if (j >= i + 2) {
      out << ranks[i] << "-" << ranks[j];
    } else {
      out << ranks[i];
      if (j == i + 1) out << ", " << ranks[j];
    }
    i = j + 1;
  }
  return out.str();
}

}  // namespace

void Comm::verify_collective(const CollectiveCall& call) {
  on_collective(call);
  if (!verify_collectives_ || size_ == 1) return;
  // Ring allgather of the records: p-1 steps, each rank passes on the record
  // it received in the previous step.
  std::vector<Fingerprint> all(static_cast<std::size_t>(size_));
  all[static_cast<std::size_t>(rank_)] = make_fingerprint(call);
  const int right = (rank_ + 1) % size_, left = (rank_ - 1 + size_) % size_;
  const auto record = static_cast<std::int64_t>(sizeof(Fingerprint));
  for (int s = 0; s < size_ - 1; ++s) {
    const auto send_block = static_cast<std::size_t>((rank_ - s + size_) % size_);
    const auto recv_block = static_cast<std::size_t>((rank_ - s - 1 + size_) % size_);
    internal_sendrecv({&all[send_block], record, DataType::kByte}, right,
                      {&all[recv_block], record, DataType::kByte}, left, kFingerprintTag);
  }

  // Group the ranks by what they called, in order of each group's first rank,
  // so every rank composes the same message.
  std::vector<std::size_t> leaders;
  std::vector<std::vector<int>> members_of;
  for (int r = 0; r < size_; ++r) {
    const auto& f = all[static_cast<std::size_t>(r)];
    auto it = std::find_if(leaders.begin(), leaders.end(),
                           [&](std::size_t l) { return same_call(all[l], f); });
    if (it == leaders.end()) {
      leaders.push_back(static_cast<std::size_t>(r));
      members_of.push_back({r});
    } else {
      members_of[static_cast<std::size_t>(it - leaders.begin())].push_back(r);
    }
  }
  if (leaders.size() == 1) return;

  std::ostringstream message;
  message << "collective mismatch: ";
  for (std::size_t g = 0; g < leaders.size(); ++g) {
    if (g == 1) message << " but ";
    if (g > 1) message << (g + 1 == leaders.size() ? " and " : ", ");
    message << describe_ranks(members_of[g]) << " called " << describe(all[leaders[g]]);
  }
  message << " (every rank of the group must make the same collective call)";
  throw CollectiveMismatch(message.str(), __FILE__, __LINE__);
}

}  // namespace dtw
