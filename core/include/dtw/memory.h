#pragma once
/// @file
/// The per-rank memory ledger: every `dtw::Array` counts its bytes here, by
/// category, so chapters report per-rank memory without counting by hand, and a
/// per-rank cap (`LaunchOptions::memory_cap`) turns "does not fit" into a
/// `dtw::OutOfMemory` that names the rank, the category and the bytes.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dtw {

/// What a block of memory holds. Training chapters report memory by these.
enum class MemoryCategory : std::uint8_t {
  kParameters,      ///< model weights (and their low-precision copies)
  kGradients,       ///< gradients of the parameters
  kOptimizerState,  ///< Adam moments, master weights, ...
  kActivations,     ///< forward activations kept for backward
  kCommBuffers,     ///< buckets, staging and receive buffers of communication
  kOther,           ///< anything else
};
/// Number of MemoryCategory values.
inline constexpr std::size_t kMemoryCategories = 6;

/// Short name of `category` ("parameters", "optimizer state", ...).
std::string_view name_of(MemoryCategory category);

/// Bytes as printed in tables and messages: "512 B", "3.5 KiB", "1.25 GiB".
std::string format_bytes(std::int64_t bytes);

/// One rank's ledger at one moment: what `Report::memory` holds per rank.
/// Trivially copyable, so it travels between processes as it is.
struct MemorySnapshot {
  int rank = -1;                                      ///< world rank, -1 when unknown
  std::array<std::int64_t, kMemoryCategories> current{};  ///< bytes held now, per category
  std::array<std::int64_t, kMemoryCategories> peak{};     ///< most ever held, per category
  std::int64_t peak_total = 0;  ///< most ever held in all categories together
  std::int64_t cap = 0;         ///< the cap, 0 when none

  /// Bytes held now in `category`.
  std::int64_t current_of(MemoryCategory category) const {
    return current[static_cast<std::size_t>(category)];
  }
  /// Most bytes ever held in `category`.
  std::int64_t peak_of(MemoryCategory category) const {
    return peak[static_cast<std::size_t>(category)];
  }
  /// Bytes held now in all categories.
  std::int64_t current_total() const;
};

/// One rank's memory ledger: current and peak bytes per category and an
/// optional cap. Thread-compatible: one rank uses it (the launch gives every
/// rank its own, reachable as `comm.exec().ledger()`).
class MemoryLedger {
 public:
  /// A ledger for world rank `rank` (-1: not a rank's) with a cap of `cap`
  /// bytes (0: none). InvalidArgument for a negative cap.
  explicit MemoryLedger(int rank = -1, std::int64_t cap = 0);

  /// Counts `bytes` more in `category`. If that would take the total past the
  /// cap, nothing is counted and OutOfMemory is thrown, naming the rank, the
  /// category, the bytes asked, the cap and what is held per category.
  /// InvalidArgument for negative `bytes`.
  void allocate(MemoryCategory category, std::int64_t bytes);
  /// Counts `bytes` less in `category`. InvalidArgument for negative `bytes` or
  /// more than the category holds (a release without its allocation).
  void release(MemoryCategory category, std::int64_t bytes);

  /// Bytes held now in `category`.
  std::int64_t current(MemoryCategory category) const { return current_[index(category)]; }
  /// Most bytes ever held in `category`.
  std::int64_t peak(MemoryCategory category) const { return peak_[index(category)]; }
  /// Bytes held now in all categories.
  std::int64_t current_total() const { return total_; }
  /// Most bytes ever held in all categories together (not the sum of the peaks).
  std::int64_t peak_total() const { return peak_total_; }
  /// Sets the cap in bytes; 0 removes it. A cap below what is held already
  /// only refuses further allocations. InvalidArgument when negative.
  void set_cap(std::int64_t bytes);
  /// The cap in bytes, 0 when none.
  std::int64_t cap() const { return cap_; }
  /// The world rank this ledger counts for (-1 when none).
  int rank() const { return rank_; }
  /// Everything above, copied.
  MemorySnapshot snapshot() const;

  /// An RAII charge for memory not held in an Array (a model's activations
  /// kept in its own containers, say): counts `bytes` in `category` for its
  /// whole life. Move-only. A null ledger makes an empty charge.
  class Charge {
   public:
    Charge() = default;
    /// Counts `bytes` in `category` of `ledger` (OutOfMemory past the cap).
    Charge(MemoryLedger* ledger, MemoryCategory category, std::int64_t bytes);
    /// Takes over `other`'s charge; `other` becomes empty.
    Charge(Charge&& other) noexcept;
    /// Releases this charge, then takes over `other`'s (left empty).
    Charge& operator=(Charge&& other) noexcept;
    Charge(const Charge&) = delete;
    Charge& operator=(const Charge&) = delete;
    ~Charge() { reset(); }
    /// Releases the charge now (a no-op for an empty one).
    void reset() noexcept;
    /// Bytes this charge holds.
    std::int64_t bytes() const { return bytes_; }

   private:
    MemoryLedger* ledger_ = nullptr;
    MemoryCategory category_ = MemoryCategory::kOther;
    std::int64_t bytes_ = 0;
  };

 private:
  static std::size_t index(MemoryCategory category) { return static_cast<std::size_t>(category); }
  std::string held_by_category() const;

  int rank_;
  std::int64_t cap_;
  std::array<std::int64_t, kMemoryCategories> current_{};
  std::array<std::int64_t, kMemoryCategories> peak_{};
  std::int64_t total_ = 0;
  std::int64_t peak_total_ = 0;
};

}  // namespace dtw
