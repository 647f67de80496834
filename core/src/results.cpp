// gather_results underneath: every rank's byte string, gathered with the
// backend's reference collectives. Strings may differ in length, while a gather
// moves equal blocks, so the ranks first allgather their lengths, then gather
// blocks padded to the longest. The bytes are staged through Arrays on the
// rank's Exec (device memory on nccl, whose collectives take no host memory),
// counted in no ledger: a report's memory shows what the rank function held.
#include <algorithm>

#include "dtw/array.h"
#include "dtw/results.h"

namespace dtw::detail {

std::vector<std::vector<std::byte>> gather_bytes(Comm& comm, std::span<const std::byte> mine,
                                                 bool all) {
  const int p = comm.size();
  const Exec staging = comm.exec().with_ledger(nullptr);
  const auto length = static_cast<std::int64_t>(mine.size());
  Array<std::int64_t> my_length(staging, std::span<const std::int64_t>(&length, 1));
  Array<std::int64_t> lengths_on_exec(staging, p);
  comm.reference_allgather(detail::const_view(my_length), detail::mutable_view(lengths_on_exec));
  const std::vector<std::int64_t> lengths = lengths_on_exec.to_vector();
  const std::int64_t block = *std::max_element(lengths.begin(), lengths.end());

  std::vector<std::byte> padded(static_cast<std::size_t>(block));
  std::copy(mine.begin(), mine.end(), padded.begin());
  const Array<std::byte> in(staging, std::span<const std::byte>(padded));
  const bool receives = all || comm.rank() == 0;
  Array<std::byte> out(staging, receives ? block * p : 0);
  if (all) {
    comm.reference_allgather(detail::const_view(in), detail::mutable_view(out));
  } else {
    comm.reference_gather(detail::const_view(in), detail::mutable_view(out), 0);
  }
  if (!receives) return {};
  const std::vector<std::byte> bytes = out.to_vector();
  std::vector<std::vector<std::byte>> blobs;
  for (int r = 0; r < p; ++r) {
    const auto begin = bytes.begin() + static_cast<std::ptrdiff_t>(r * block);
    blobs.emplace_back(begin, begin + static_cast<std::ptrdiff_t>(lengths[static_cast<std::size_t>(r)]));
  }
  return blobs;
}

}  // namespace dtw::detail
