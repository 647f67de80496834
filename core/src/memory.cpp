// The per-rank memory ledger.
#include "dtw/memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <utility>

#include "dtw/errors.h"

namespace dtw {
namespace {
// "rank 2: " when the ledger belongs to a rank, "" otherwise.
std::string owner(int rank) {
  return rank >= 0 ? "rank " + std::to_string(rank) + ": " : std::string();
}
}  // namespace

std::string_view name_of(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kParameters: return "parameters";
    case MemoryCategory::kGradients: return "gradients";
    case MemoryCategory::kOptimizerState: return "optimizer state";
    case MemoryCategory::kActivations: return "activations";
    case MemoryCategory::kCommBuffers: return "comm buffers";
    case MemoryCategory::kOther: return "other";
  }
  return "?";
}

std::string format_bytes(std::int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < (1 << 20)) return fmt::format("{:.1f} KiB", b / 1024.0);
  if (bytes < (std::int64_t{1} << 30)) return fmt::format("{:.1f} MiB", b / 1048576.0);
  return fmt::format("{:.2f} GiB", b / 1073741824.0);
}

std::int64_t MemorySnapshot::current_total() const {
  return std::accumulate(current.begin(), current.end(), std::int64_t{0});
}

MemoryLedger::MemoryLedger(int rank, std::int64_t cap) : rank_(rank), cap_(0) { set_cap(cap); }

void MemoryLedger::set_cap(std::int64_t bytes) {
  DTW_CHECK_ARG(bytes >= 0, owner(rank_) << "memory cap of " << bytes << " bytes: must be >= 0 (0: none)");
  cap_ = bytes;
}

std::string MemoryLedger::held_by_category() const {
  std::string out;
  for (std::size_t c = 0; c < kMemoryCategories; ++c) {
    out += fmt::format("{}{} {}", c ? ", " : "", name_of(static_cast<MemoryCategory>(c)),
                       format_bytes(current_[c]));
  }
  return out;
}

void MemoryLedger::allocate(MemoryCategory category, std::int64_t bytes) {
  DTW_CHECK_ARG(bytes >= 0, owner(rank_) << "allocate " << bytes << " bytes of "
                                         << name_of(category) << ": must be >= 0");
  // Compared as "bytes > cap - total" so a huge request cannot overflow.
  DTW_CHECK(cap_ == 0 || bytes <= cap_ - total_, OutOfMemory,
            owner(rank_) << "out of memory: asked for " << bytes << " bytes ("
                         << format_bytes(bytes) << ") of " << name_of(category) << " holding "
                         << total_ << " bytes (" << format_bytes(total_)
                         << ") already, past this rank's cap of " << cap_ << " bytes ("
                         << format_bytes(cap_) << "); held: " << held_by_category());
  const std::size_t c = index(category);
  current_[c] += bytes;
  total_ += bytes;
  peak_[c] = std::max(peak_[c], current_[c]);
  peak_total_ = std::max(peak_total_, total_);
}

void MemoryLedger::release(MemoryCategory category, std::int64_t bytes) {
  const std::size_t c = index(category);
  DTW_CHECK_ARG(bytes >= 0 && bytes <= current_[c],
                owner(rank_) << "release " << bytes << " bytes of " << name_of(category)
                             << ": the ledger holds " << current_[c]
                             << " bytes there (a release without its allocation?)");
  current_[c] -= bytes;
  total_ -= bytes;
}

MemorySnapshot MemoryLedger::snapshot() const {
  MemorySnapshot s;
  s.rank = rank_;
  s.current = current_;
  s.peak = peak_;
  s.peak_total = peak_total_;
  s.cap = cap_;
  return s;
}

MemoryLedger::Charge::Charge(MemoryLedger* ledger, MemoryCategory category, std::int64_t bytes)
    : category_(category) {
  if (!ledger) return;
  ledger->allocate(category, bytes);  // throws before this charge holds anything
  ledger_ = ledger;
  bytes_ = bytes;
}

MemoryLedger::Charge::Charge(Charge&& other) noexcept
    : ledger_(std::exchange(other.ledger_, nullptr)),
      category_(other.category_),
      bytes_(std::exchange(other.bytes_, 0)) {}

MemoryLedger::Charge& MemoryLedger::Charge::operator=(Charge&& other) noexcept {
  if (this != &other) {
    reset();
    ledger_ = std::exchange(other.ledger_, nullptr);
    category_ = other.category_;
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void MemoryLedger::Charge::reset() noexcept {
  if (ledger_) {
    // Cannot fail: the charge holds exactly what it counted.
    const std::size_t c = index(category_);
    ledger_->current_[c] -= bytes_;
    ledger_->total_ -= bytes_;
  }
  ledger_ = nullptr;
  bytes_ = 0;
}

}  // namespace dtw
