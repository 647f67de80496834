#pragma once
/// @file
/// Chapter 00 — ranks and messages: the contract the lab fills in.
///
/// Three small programs that use nothing but point-to-point messages:
///   - 00.1 `ping_pong` measures round trips between two ranks and
///     `fit_alpha_beta` turns them into the α-β cost model every later
///     chapter uses;
///   - 00.2 `token_ring` passes one value around all ranks;
///   - 00.3 `exchange_with_neighbors` swaps halos with both ring neighbours
///     in an order that cannot deadlock.
/// This file says what each must do; the chapter text says what each must
/// get right and why ("What each piece must get right").
///
/// Every function here is called by every rank of the communicator with the
/// same arguments (except the per-rank data), as SPMD code is.

#include <cstdint>
#include <span>
#include <vector>

#include "dtw/dtw.h"

namespace dtw::ch00 {

// ---- 00.1: ping-pong and the α-β model --------------------------------------

/// One measured message size.
struct PingPongSample {
  std::int64_t bytes = 0;         ///< payload of one message, each way
  double round_trip_seconds = 0;  ///< time for bytes to go there and back
};

/// Bounces a message of each size in `sizes` between ranks `peer_a` and
/// `peer_b`, `repeats` times, and reports the fastest round trip per size.
///
/// Every rank calls it with the same arguments; ranks other than the two
/// peers return at once without sending anything. Before timing a size, one
/// untimed round trip warms the path up (first-touch page faults, cold caches).
/// A round trip is timed on peer_a's clock from before its send to after it
/// has received the echo: the whole round trip, 2·T(n), not half of it.
///
/// Bytes on the wire: each round trip moves `bytes` from a to b and `bytes`
/// back, so a size costs (repeats + 1) messages each way, 2·bytes·(repeats + 1)
/// in all, and nothing else.
///
/// @returns on `peer_a`: one sample per entry of `sizes`, in the same order,
///          with the fastest of that size's `repeats` timed round trips.
///          On every other rank (`peer_b` included): an empty vector.
/// @throws InvalidArgument if the world has fewer than 2 ranks, a peer is out
///         of range, the peers are equal, a size is negative or `repeats` < 1.
std::vector<PingPongSample> ping_pong(Comm& comm, std::span<const std::int64_t> sizes, int repeats,
                                      int peer_a = 0, int peer_b = 1);

/// The α-β model of one message: T(n) = α + n·β.
struct AlphaBeta {
  double alpha_seconds = 0;          ///< latency: the cost of a message of 0 bytes
  double beta_seconds_per_byte = 0;  ///< inverse bandwidth: 1/β is bytes per second

  /// Modelled one-way time of an `n`-byte message.
  double seconds(std::int64_t n) const {
    return alpha_seconds + static_cast<double>(n) * beta_seconds_per_byte;
  }
};

/// Fits α and β to the one-way times y = round_trip_seconds / 2 against
/// x = bytes by least squares of the *relative* error: it minimises
/// Σ ((α + β·x − y) / y)², ordinary least squares with weights 1/y², so that
/// an 8-byte sample counts as much as a 64 MiB one. Closed form, no iteration.
/// Exact data y = α + β·x gives back α and β up to rounding.
/// @throws InvalidArgument if `samples` holds fewer than 2 distinct sizes or
///         a round trip that is not > 0.
AlphaBeta fit_alpha_beta(std::span<const PingPongSample> samples);

// ---- 00.2: a token around the ring ------------------------------------------

/// Passes a token around the ring 0 → 1 → … → p−1 → 0, `laps` times. Rank 0
/// starts with `token`; every rank adds (its rank + 1) each time it holds the
/// token, so after the laps rank 0 holds token + laps·p(p+1)/2. A last pass
/// around the ring then hands the result to every rank.
///
/// Bytes on the wire: laps·p messages of 8 bytes, one per lap on every link
/// r → r+1 and p−1 → 0, plus p−1 for the result along 0 → 1 → … → p−1 (none
/// back to rank 0). Nothing moves in any other direction. A world of one rank
/// sends nothing (a blocking send to yourself would wait forever for a
/// receive that cannot be posted).
///
/// @returns the final token, on every rank.
/// @throws InvalidArgument if `laps` is negative.
std::int64_t token_ring(Comm& comm, std::int64_t token, int laps = 1);

// ---- 00.3: a safe neighbour exchange ----------------------------------------

/// The 1-D halo exchange on a periodic ring: rank r sends `to_left` to rank
/// r−1 and `to_right` to rank r+1 (mod p), and receives into `from_left` what
/// rank r−1 sent right and into `from_right` what rank r+1 sent left.
/// Written so it cannot deadlock for any p, including p = 1 (you are your own
/// neighbour) and p = 2 (your left and right neighbour are the same rank).
///
/// T is float, double, std::int32_t or std::int64_t.
/// Bytes on the wire per rank: one message to each neighbour, to_left with tag
/// kLeftward and to_right with tag kRightward (the direction of travel),
/// (to_left.size() + to_right.size())·sizeof(T) in all. Every request it
/// posts is complete when it returns.
///
/// @throws InvalidArgument (naming both ranks) if a receive buffer's size
///         differs from what the neighbour sends.
template <NumericElement T>
void exchange_with_neighbors(Comm& comm, std::span<const T> to_left, std::span<const T> to_right,
                             std::span<T> from_left, std::span<T> from_right);

// The definitions live in the chapter's library, instantiated for these types.
#define DTW_CH00_EXTERN(T)                                                                       \
  extern template void exchange_with_neighbors<T>(Comm&, std::span<const T>, std::span<const T>, \
                                                  std::span<T>, std::span<T>)
DTW_CH00_EXTERN(float);
DTW_CH00_EXTERN(double);
DTW_CH00_EXTERN(std::int32_t);
DTW_CH00_EXTERN(std::int64_t);
#undef DTW_CH00_EXTERN

}  // namespace dtw::ch00
