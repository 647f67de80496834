// Batches by token range (sequence_batch.h).
#include "dtw/train/sequence_batch.h"

#include "dtw/errors.h"

namespace dtw::train {

Batch sequence_shard_of(const Batch& rows, const model::ModelShard& shard) {
  DTW_CHECK_ARG(rows.tokens.size() == static_cast<std::size_t>(rows.rows * rows.seq_len),
                "sequence_shard_of: only a token batch can be cut along the sequence");
  const model::TokenRuns runs = shard.positions(rows.seq_len);
  Batch out;
  out.rows = rows.rows;
  out.seq_len = runs.size();
  out.tokens.reserve(static_cast<std::size_t>(out.rows * out.seq_len));
  out.targets.reserve(out.tokens.capacity());
  for (std::int64_t b = 0; b < rows.rows; ++b) {
    for (const model::IndexRange& r : runs.runs) {
      const auto at = static_cast<std::ptrdiff_t>(b * rows.seq_len);
      out.tokens.insert(out.tokens.end(), rows.tokens.begin() + at + r.begin,
                        rows.tokens.begin() + at + r.end);
      out.targets.insert(out.targets.end(), rows.targets.begin() + at + r.begin,
                         rows.targets.begin() + at + r.end);
    }
  }
  out.weight = rows.weight * static_cast<double>(out.seq_len) / static_cast<double>(rows.seq_len);
  return out;
}

}  // namespace dtw::train
