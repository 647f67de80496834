// A rank's share of the GPT and the layout of its local tensors (shard.h).
#include "dtw/model/shard.h"

#include <sstream>

#include "dtw/errors.h"

namespace dtw::model {
namespace {

const char* split_name(SequenceSplit s) {
  return s == SequenceSplit::kZigZag ? "zig-zag" : "contiguous";
}

void check_range(const char* what, IndexRange r, std::int64_t extent, const ModelConfig& c) {
  const IndexRange x = r.resolved(extent);
  DTW_CHECK_ARG(0 <= x.begin && x.begin < x.end && x.end <= extent,
                "ModelShard: " << what << " [" << x.begin << ", " << x.end
                               << ") is empty or outside [0, " << extent << ") of model "
                               << c.name);
}

// Cuts a whole view down to the shard: `shape` is the local shape, `slice`
// where it sits in the whole tensor.
void cut(ParamView& v, std::vector<std::int64_t> shape, TensorSlice slice) {
  v.whole_shape = v.shape;
  v.shape = std::move(shape);
  v.size = 1;
  for (std::int64_t s : v.shape) v.size *= s;
  v.slice = slice;
}

bool ends_with(const std::string& s, const char* tail) {
  const std::string t(tail);
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

}  // namespace

std::int64_t TokenRuns::size() const {
  std::int64_t n = 0;
  for (const IndexRange& r : runs) n += r.end - r.begin;
  return n;
}

std::int64_t TokenRuns::position(std::int64_t t) const {
  for (const IndexRange& r : runs) {
    if (t < r.end - r.begin) return r.begin + t;
    t -= r.end - r.begin;
  }
  DTW_CHECK_ARG(false, "TokenRuns: local token " << t << " is beyond the " << size() << " held");
  return -1;
}

bool TokenRuns::whole() const { return runs.size() == 1 && runs[0].begin == 0; }

ModelShard ModelShard::tensor_slice(const ModelConfig& c, int r, int t) {
  DTW_CHECK_ARG(t >= 1 && 0 <= r && r < t,
                "ModelShard::tensor_slice: slice " << r << " of " << t << " does not exist");
  DTW_CHECK_ARG(c.heads % t == 0 && c.mlp_hidden % t == 0 && c.vocab % t == 0,
                "ModelShard::tensor_slice: model " << c.name << " has " << c.heads << " heads, "
                                                   << c.mlp_hidden << " hidden units and vocab "
                                                   << c.vocab << "; each must divide by " << t);
  ModelShard s;
  s.heads = {r * c.heads / t, (r + 1) * c.heads / t};
  s.hidden = {r * c.mlp_hidden / t, (r + 1) * c.mlp_hidden / t};
  s.vocab = {r * c.vocab / t, (r + 1) * c.vocab / t};
  return s;
}

ModelShard ModelShard::sequence(int r, int s, SequenceSplit split) {
  ModelShard shard;
  shard.sequence_shard = r;
  shard.sequence_shards = s;
  shard.split = split;
  DTW_CHECK_ARG(s >= 1 && 0 <= r && r < s,
                "ModelShard::sequence: shard " << r << " of " << s << " does not exist");
  return shard;
}

void ModelShard::validate(const ModelConfig& c) const {
  DTW_CHECK_ARG(c.kind == ModelKind::kGpt,
                "ModelShard: only a gpt can be cut; model " << c.name << " is not one");
  check_range("heads", heads, c.heads, c);
  check_range("hidden units", hidden, c.mlp_hidden, c);
  check_range("vocabulary", vocab, c.vocab, c);
  DTW_CHECK_ARG(sequence_shards >= 1 && 0 <= sequence_shard && sequence_shard < sequence_shards,
                "ModelShard: sequence shard " << sequence_shard << " of " << sequence_shards
                                              << " does not exist");
}

bool ModelShard::holds_every_parameter(const ModelConfig& c) const {
  auto full = [](IndexRange r, std::int64_t n) {
    const IndexRange x = r.resolved(n);
    return x.begin == 0 && x.end == n;
  };
  return full(heads, c.heads) && full(hidden, c.mlp_hidden) && full(vocab, c.vocab);
}

bool ModelShard::is_whole(const ModelConfig& c) const {
  return holds_every_parameter(c) && sequence_shards == 1;
}

TokenRuns ModelShard::positions(std::int64_t seq_len) const {
  const std::int64_t s = sequence_shards, r = sequence_shard;
  // One shard holds the whole sequence however it is split.
  const bool zigzag = split == SequenceSplit::kZigZag && s > 1;
  const std::int64_t chunks = zigzag ? 2 * s : s;
  DTW_CHECK_ARG(seq_len >= 1 && seq_len % chunks == 0,
                "ModelShard: a sequence of " << seq_len << " tokens does not cut into " << chunks
                                             << " equal chunks (" << s << " " << split_name(split)
                                             << " shards)");
  const std::int64_t n = seq_len / chunks;
  TokenRuns t;
  t.runs.push_back({r * n, (r + 1) * n});
  if (zigzag) {
    const std::int64_t late = 2 * s - 1 - r;
    t.runs.push_back({late * n, (late + 1) * n});
  }
  return t;
}

std::string ModelShard::describe(const ModelConfig& c) const {
  std::ostringstream os;
  const IndexRange h = heads.resolved(c.heads), f = hidden.resolved(c.mlp_hidden),
                   v = vocab.resolved(c.vocab);
  os << "heads [" << h.begin << ", " << h.end << ") hidden [" << f.begin << ", " << f.end
     << ") vocab [" << v.begin << ", " << v.end << ") tokens " << sequence_shard + 1 << "/"
     << sequence_shards << " " << split_name(split) << (cut_by_seams ? " (cut by the seams)" : "");
  return os.str();
}

ParamLayout param_layout(const ModelConfig& c, const ModelShard& shard) {
  shard.validate(c);
  ParamLayout whole = param_layout(c);
  if (shard.holds_every_parameter(c)) return whole;
  const std::int64_t C = c.dim, D = c.head_dim(), F = c.mlp_hidden;
  const IndexRange h = shard.heads.resolved(c.heads), f = shard.hidden.resolved(F),
                   v = shard.vocab.resolved(c.vocab);
  const std::int64_t W = (h.end - h.begin) * D, w0 = h.begin * D, Fl = f.end - f.begin;
  std::vector<ParamView> views = whole.views();
  std::int64_t offset = 0;
  for (ParamView& p : views) {
    const std::string& n = p.name;
    if (n == "wte" || n == "head.weight") {
      // A vocabulary slice: rows [v0, v1), one run.
      cut(p, {v.end - v.begin, C}, {v.begin * C, 0, 0});
    } else if (ends_with(n, "attn.qkv.weight")) {
      // The rows of the held heads in each of the q, k and v thirds.
      cut(p, {3 * W, C}, {w0 * C, W * C, C * C});
    } else if (ends_with(n, "attn.qkv.bias")) {
      cut(p, {3 * W}, {w0, W, C});
    } else if (ends_with(n, "attn.proj.weight")) {
      // Row-parallel: columns [w0, w0 + W) of every output row.
      cut(p, {C, W}, {w0, W, C});
    } else if (ends_with(n, "mlp.fc.weight")) {
      cut(p, {Fl, C}, {f.begin * C, 0, 0});
    } else if (ends_with(n, "mlp.fc.bias")) {
      cut(p, {Fl}, {f.begin, 0, 0});
    } else if (ends_with(n, "mlp.proj.weight")) {
      cut(p, {C, Fl}, {f.begin, Fl, F});
    }
    p.offset = offset;
    offset += p.size;
  }
  return ParamLayout(std::move(views));
}

}  // namespace dtw::model
