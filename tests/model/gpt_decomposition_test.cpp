// The GPT computed as t tensor slices or s sequence shards, combined in plain
// code (decomposition.h), equals the whole model: the loss and every
// gradient, in double, to 1e-12 of each tensor's largest gradient. This is the
// specification chapters 06 (tensor parallelism) and 07 (sequence
// parallelism) distribute with real collectives.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "decomposition.h"
#include "dtw_expect_error.h"
#include "dtw/errors.h"
#include "dtw/model/gpt.h"
#include "model_test_util.h"

namespace dtw::model {
namespace {

using testing::LocalGroup;

constexpr double kTol = 1e-12;

// 12 heads of 2 and 24 hidden units over a vocabulary of 12: every t in
// {1, 2, 3, 4} divides all three. Sequences of 16 tokens cut into 2·4 chunks.
ModelConfig decomposable_gpt(bool tied) {
  ModelConfig c = testing::gradcheck_gpt(tied);
  c.name = tied ? "gpt-decomposable" : "gpt-decomposable-untied";
  c.vocab = 12;
  c.context = 16;
  c.dim = 24;
  c.heads = 12;
  c.mlp_hidden = 24;
  return c;
}

constexpr std::int64_t kBatch = 2, kSeq = 16;

struct Whole {
  ParamLayout layout;
  std::vector<double> params, grads;
  std::vector<std::int32_t> tokens, targets;
  double loss = 0;
};

Whole whole_model(const ModelConfig& c) {
  Whole w;
  w.layout = param_layout(c);
  w.params = testing::random_params(w.layout, 7);
  w.tokens = testing::random_tokens(kBatch * kSeq, c.vocab, 8);
  w.targets = testing::random_tokens(kBatch * kSeq, c.vocab, 9);
  Gpt<double> gpt(c);
  w.loss = gpt.forward(w.params.data(), w.tokens.data(), w.targets.data(), kBatch, kSeq);
  w.grads.assign(w.params.size(), 0.0);
  gpt.backward(w.params.data(), w.grads.data());
  return w;
}

// The worst |got − want| / max|want| over the tensor, for every tensor.
struct Worst {
  std::map<std::string, double> by_tensor;
  double all = 0;
  void add(const std::string& name, double rel) {
    by_tensor[name] = std::max(by_tensor[name], rel);
    all = std::max(all, rel);
  }
};

// Compares a shard's local gradient with the whole model's, element by
// element through the view's slice.
void compare_views(const Whole& w, const std::vector<ParamView>& views,
                   const std::vector<double>& grads, Worst& worst, const std::string& who) {
  for (const ParamView& v : views) {
    const ParamView& whole = w.layout.find(v.name);
    double scale = 0;
    for (std::int64_t i = 0; i < whole.size; ++i)
      scale = std::max(scale, std::abs(w.grads[whole.offset + i]));
    scale = std::max(scale, 1e-300);
    for (std::int64_t i = 0; i < v.size; ++i) {
      const double want = w.grads[whole.offset + v.slice.whole_index(i)];
      const double got = grads[v.offset + i];
      const double rel = std::abs(got - want) / scale;
      worst.add(v.name, rel);
      ASSERT_LE(rel, kTol) << who << ": gradient of " << v.name << " local index " << i
                           << " (whole index " << v.slice.whole_index(i) << "): got " << got
                           << ", want " << want;
    }
  }
}

void compare(const Whole& w, const ParamLayout& local, const std::vector<double>& grads,
             Worst& worst, const std::string& who) {
  compare_views(w, local.views(), grads, worst, who);
}

// Slices of one kind, or all at once.
enum class Kind { kHeads, kHidden, kVocab, kAll };
const char* name_of(Kind k) {
  switch (k) {
    case Kind::kHeads: return "heads";
    case Kind::kHidden: return "hidden";
    case Kind::kVocab: return "vocab";
    case Kind::kAll: return "all";
  }
  return "?";
}
ModelShard slice(const ModelConfig& c, Kind kind, int r, int t) {
  const ModelShard all = ModelShard::tensor_slice(c, r, t);
  ModelShard s;
  if (kind == Kind::kHeads || kind == Kind::kAll) s.heads = all.heads;
  if (kind == Kind::kHidden || kind == Kind::kAll) s.hidden = all.hidden;
  if (kind == Kind::kVocab || kind == Kind::kAll) s.vocab = all.vocab;
  return s;
}

TEST(GptDecompositionTest, TensorSlicesSumToTheWholeModel) {
  for (bool tied : {true, false}) {
    const ModelConfig c = decomposable_gpt(tied);
    const Whole w = whole_model(c);
    for (Kind kind : {Kind::kHeads, Kind::kHidden, Kind::kVocab, Kind::kAll}) {
      Worst worst;
      for (int t : {1, 2, 3, 4}) {
        const std::string who = std::string(tied ? "tied" : "untied") + " " + name_of(kind) +
                                " t=" + std::to_string(t);
        LocalGroup group(t);
        std::vector<double> losses(static_cast<std::size_t>(t));
        std::vector<Gpt<double>> gpts;
        gpts.reserve(static_cast<std::size_t>(t));
        std::vector<std::vector<double>> params, grads;
        for (int r = 0; r < t; ++r) {
          gpts.emplace_back(c, slice(c, kind, r, t));
          params.push_back(testing::cut_params(w.layout, gpts[r].layout(), w.params));
          grads.emplace_back(params.back().size(), 0.0);
        }
        testing::run_shards(t, [&](int r) {
          testing::TensorParallelSeams seams(
              group, r, {kind == Kind::kVocab || kind == Kind::kAll,
                         kind == Kind::kHeads || kind == Kind::kAll,
                         kind == Kind::kHidden || kind == Kind::kAll});
          gpts[r].set_seams(&seams);
          losses[r] = gpts[r].forward(params[r].data(), w.tokens.data(), w.targets.data(), kBatch,
                                      kSeq);
          gpts[r].backward(params[r].data(), grads[r].data());
          gpts[r].set_seams(nullptr);
        });
        for (int r = 0; r < t; ++r) {
          ASSERT_NEAR(losses[r], w.loss, kTol * std::abs(w.loss)) << who << " rank " << r;
          compare(w, gpts[r].layout(), grads[r], worst, who + " rank " + std::to_string(r));
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
      std::printf("tensor slices of %s (%s head): worst relative difference %.2e\n",
                  name_of(kind), tied ? "tied" : "untied", worst.all);
    }
  }
}

TEST(GptDecompositionTest, SequenceShardsSumToTheWholeModel) {
  const ModelConfig c = decomposable_gpt(true);
  const Whole w = whole_model(c);
  for (SequenceSplit split : {SequenceSplit::kContiguous, SequenceSplit::kZigZag}) {
    for (int s : {1, 2, 4}) {
      const std::string who = std::string(split == SequenceSplit::kZigZag ? "zig-zag" : "contiguous") +
                              " s=" + std::to_string(s);
      LocalGroup group(s);
      std::vector<double> losses(static_cast<std::size_t>(s));
      std::vector<std::vector<double>> grads(static_cast<std::size_t>(s),
                                             std::vector<double>(w.params.size(), 0.0));
      testing::run_shards(s, [&](int r) {
        const ModelShard shard = ModelShard::sequence(r, s, split);
        const TokenRuns runs = shard.positions(kSeq);
        const std::int64_t n = runs.size();
        // This shard's tokens of every sequence, in local order.
        std::vector<std::int32_t> tokens, targets;
        for (std::int64_t b = 0; b < kBatch; ++b)
          for (std::int64_t t = 0; t < n; ++t) {
            tokens.push_back(w.tokens[b * kSeq + runs.position(t)]);
            targets.push_back(w.targets[b * kSeq + runs.position(t)]);
          }
        testing::SequenceSeams seams(group, r);
        Gpt<double> gpt(c, shard);
        gpt.set_seams(&seams);
        losses[r] = gpt.forward(w.params.data(), tokens.data(), targets.data(), kBatch, n);
        // Each shard's mean loss weighs its share of the tokens: 1/s here.
        gpt.backward(w.params.data(), grads[r].data(), 1.0 / s);
      });
      double loss = 0;
      std::vector<double> sum(w.params.size(), 0.0);
      for (int r = 0; r < s; ++r) {
        loss += losses[r] / s;
        for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += grads[r][i];
      }
      ASSERT_NEAR(loss, w.loss, kTol * std::abs(w.loss)) << who;
      Worst worst;
      compare(w, w.layout, sum, worst, who);
      if (HasFatalFailure()) return;
      std::printf("sequence shards, %s: worst relative difference %.2e\n", who.c_str(), worst.all);
    }
  }
}

// Megatron-SP: the seams change the row count (all-gather before a sublayer,
// reduce-scatter after), so the norms and residuals run on a token range and
// the sublayers on the whole sequence. The norms' and biases' gradients are
// then partial per rank: their sum is the whole's (the pitfall of chapter 06
// is to forget that sum). Both ways of feeding the sublayers' backward: the
// gathered inputs kept, or gathered again (two more gathers per block).
TEST(GptDecompositionTest, SequenceParallelNormsAroundTensorSlicesEqualTheWholeBlock) {
  const ModelConfig c = decomposable_gpt(true);
  const ParamLayout layout = param_layout(c);
  const std::vector<double> p = testing::random_params(layout, 11);
  const std::int64_t C = c.dim, N = kBatch * kSeq;
  const std::vector<double> x = testing::random_vector(N * C, 12),
                            dy = testing::random_vector(N * C, 13);
  const BlockDims full = block_dims(c, kBatch, kSeq);
  BlockCache<double> cache;
  std::vector<double> y(N * C), dx(N * C), g(p.size(), 0.0), scratch(block_scratch_size(full));
  block_forward(y.data(), cache, x.data(), block_weights(layout, 0, p.data()), full);
  block_backward(dx.data(), block_weights(layout, 0, g.data()), dy.data(), x.data(), cache,
                 block_weights(layout, 0, p.data()), full, scratch.data());
  const Whole w{layout, p, g, {}, {}, 0};
  for (const bool again : {false, true})
    for (int t : {1, 2, 4}) {
      const std::string who = std::string("sequence-parallel, ") +
                              (again ? "entered again" : "inputs kept") +
                              ", t=" + std::to_string(t);
      const std::int64_t l = kSeq / t;
      LocalGroup group(t);
      std::vector<ParamLayout> layouts;
      std::vector<std::vector<double>> ys(t), dxs(t), grads(t);
      for (int r = 0; r < t; ++r)
        layouts.push_back(param_layout(c, ModelShard::tensor_slice(c, r, t)));
      testing::run_shards(t, [&](int r) {
        const std::vector<double> lp = testing::cut_params(layout, layouts[r], p);
        grads[r].assign(lp.size(), 0.0);
        std::vector<double> lx, ldy;
        for (std::int64_t b = 0; b < kBatch; ++b) {
          lx.insert(lx.end(), x.begin() + (b * kSeq + r * l) * C,
                    x.begin() + (b * kSeq + (r + 1) * l) * C);
          ldy.insert(ldy.end(), dy.begin() + (b * kSeq + r * l) * C,
                     dy.begin() + (b * kSeq + (r + 1) * l) * C);
        }
        BlockDims d = block_dims(c, kBatch, l);
        d.heads = c.heads / t;
        d.mlp_hidden = c.mlp_hidden / t;
        testing::SequenceParallelSeams seams(group, r, kBatch, kSeq, C, again);
        const TokenRuns runs =
            ModelShard::sequence(r, t, SequenceSplit::kContiguous).positions(kSeq);
        const BlockSeams<double> at{&seams, 0, &runs};
        BlockCache<double> lc;
        ys[r].resize(lx.size());
        dxs[r].resize(lx.size());
        std::vector<double> ls(block_scratch_size(d));
        block_forward(ys[r].data(), lc, lx.data(), block_weights(layouts[r], 0, lp.data()), d,
                      nullptr, at);
        block_backward(dxs[r].data(), block_weights(layouts[r], 0, grads[r].data()), ldy.data(),
                       lx.data(), lc, block_weights(layouts[r], 0, lp.data()), d, ls.data(),
                       nullptr, {}, at);
        EXPECT_EQ(lc.attn_in.empty() && lc.mlp_in.empty(), again) << who << " rank " << r;
        EXPECT_EQ(seams.enters(), again ? 4 : 2) << who << " rank " << r << ": gathers by enter";
      });
      for (int r = 0; r < t; ++r)
        for (std::int64_t b = 0; b < kBatch; ++b)
          for (std::int64_t i = 0; i < l * C; ++i) {
            const std::int64_t at = (b * kSeq + r * l) * C + i;
            ASSERT_NEAR(ys[r][b * l * C + i], y[at], kTol) << who << " rank " << r << " x_out";
            ASSERT_NEAR(dxs[r][b * l * C + i], dx[at], kTol) << who << " rank " << r << " dx_in";
          }
      // Sliced tensors' gradients are each rank's own; replicated ones (the
      // norms, the projections' biases) are summed over the ranks.
      Worst worst;
      std::vector<double> replicated(g.size(), 0.0);
      for (int r = 0; r < t; ++r) {
        std::vector<double> own = grads[r];
        for (const ParamView& v : layouts[r].views()) {
          if (v.layer != 0 || !v.is_whole()) continue;
          const ParamView& whole = layout.find(v.name);
          for (std::int64_t i = 0; i < v.size; ++i) {
            replicated[whole.offset + i] += own[v.offset + i];
            own[v.offset + i] = g[whole.offset + i];  // checked below, summed
          }
        }
        std::vector<ParamView> views;
        for (const ParamView& v : layouts[r].views())
          if (v.layer == 0) views.push_back(v);
        compare_views(w, views, own, worst, who + " rank " + std::to_string(r));
        if (HasFatalFailure()) return;
      }
      for (const ParamView& v : layout.views_of_layer(0)) {
        if (v.name.find("ln") == std::string::npos && v.name.find("proj.bias") == std::string::npos)
          continue;
        for (std::int64_t i = 0; i < v.size; ++i)
          ASSERT_NEAR(replicated[v.offset + i], g[v.offset + i], kTol)
              << who << ": the sum over ranks of " << v.name << "[" << i << "]";
      }
      std::printf("sequence-parallel norms, %s: worst relative difference %.2e\n", who.c_str(),
                  worst.all);
    }
}

UnitRange every_unit(const Gpt<double>& gpt) {
  return {0, static_cast<int>(gpt.units().size())};
}

// Bytes of every vector a forward keeps for its backward: what a rank
// really holds, to compare with what Gpt::activation_bytes charges the ledger.
std::int64_t held_bytes(const GptActivations<double>& a) {
  std::int64_t n = 0;
  auto add = [&](const auto& v) {
    n += static_cast<std::int64_t>(v.size() *
                                   sizeof(typename std::decay_t<decltype(v)>::value_type));
  };
  add(a.tokens);
  add(a.targets);
  for (const auto& x : a.x) add(x);
  for (const BlockCache<double>& b : a.blocks)
    for (const auto* v : {&b.ln1, &b.ln1_mean, &b.ln1_rstd, &b.attn_in, &b.mlp_in, &b.attn.qkv,
                          &b.attn.q, &b.attn.k, &b.attn.v, &b.attn.core.probs, &b.attn.core.lse,
                          &b.attn.core.saved, &b.attn.per_head, &b.attn.merged, &b.mid, &b.ln2,
                          &b.ln2_mean, &b.ln2_rstd, &b.mlp.pre, &b.mlp.act})
      add(*v);
  for (const auto* v : {&a.head.ln, &a.head.mean, &a.head.rstd, &a.head.in, &a.head.logits,
                        &a.head.probs, &a.head.losses})
    add(*v);
  return n;
}

// Megatron-SP with vocabulary-parallel ends on the whole GPT: every rank is
// given the whole sequences, looks up its vocabulary slice's rows, and the
// embedding's reduce-scatter leaves it its tokens of the residual stream
// (ModelShard::cut_by_seams); the head gathers them back, so every rank's
// loss is the whole batch's, from the two vocabulary reductions. The sliced
// tensors' gradients are each rank's own part of the whole's; the
// replicated ones (norms, row-parallel biases, wpe, lnf) are partial sums.
TEST(GptDecompositionTest, SequenceParallelWithVocabularyParallelEndsEqualsTheWholeModel) {
  for (const bool tied : {true, false}) {
    const ModelConfig c = decomposable_gpt(tied);
    const Whole w = whole_model(c);
    for (const bool again : {false, true})
      for (int t : {1, 2, 4}) {
        const std::string who = std::string(tied ? "tied" : "untied") +
                                (again ? ", entered again" : ", inputs kept") +
                                ", t=" + std::to_string(t);
        LocalGroup group(t);
        std::vector<double> losses(static_cast<std::size_t>(t));
        std::vector<ParamLayout> layouts(static_cast<std::size_t>(t));
        std::vector<std::vector<double>> grads(static_cast<std::size_t>(t));
        std::vector<std::int64_t> charged(static_cast<std::size_t>(t)), held(charged);
        testing::run_shards(t, [&](int r) {
          ModelShard shard = ModelShard::tensor_slice(c, r, t);
          shard.sequence_shard = r;
          shard.sequence_shards = t;
          shard.cut_by_seams = true;
          Gpt<double> gpt(c, shard);
          layouts[r] = gpt.layout();
          const std::vector<double> p = testing::cut_params(w.layout, gpt.layout(), w.params);
          grads[r].assign(p.size(), 0.0);
          testing::SequenceParallelSeams seams(group, r, kBatch, kSeq, c.dim, again, true);
          gpt.set_seams(&seams);
          losses[r] = gpt.forward(p.data(), w.tokens.data(), w.targets.data(), kBatch, kSeq);
          charged[r] = gpt.activation_bytes(every_unit(gpt), kBatch, kSeq);
          held[r] = held_bytes(gpt.activations());
          EXPECT_EQ(gpt.output().size(), static_cast<std::size_t>(kBatch * kSeq / t * c.dim))
              << who << " rank " << r << ": the residual stream holds the rank's tokens";
          gpt.backward(p.data(), grads[r].data());
          gpt.set_seams(nullptr);
        });
        std::map<std::string, std::vector<double>> summed;
        Worst worst;
        for (int r = 0; r < t; ++r) {
          ASSERT_NEAR(losses[r], w.loss, kTol * std::abs(w.loss)) << who << " rank " << r;
          EXPECT_EQ(charged[r], held[r]) << who << " rank " << r << ": activation bytes";
          std::vector<ParamView> own;
          for (const ParamView& v : layouts[r].views()) {
            if (!v.is_whole()) {
              own.push_back(v);
              continue;
            }
            std::vector<double>& s = summed[v.name];
            s.resize(static_cast<std::size_t>(v.size), 0.0);
            for (std::int64_t i = 0; i < v.size; ++i) s[i] += grads[r][v.offset + i];
          }
          compare_views(w, own, grads[r], worst, who + " rank " + std::to_string(r));
          if (HasFatalFailure()) return;
        }
        ASSERT_FALSE(summed.empty()) << who;
        for (const auto& [name, s] : summed) {
          const ParamView& v = w.layout.find(name);
          double scale = 1e-300;
          for (std::int64_t i = 0; i < v.size; ++i)
            scale = std::max(scale, std::abs(w.grads[v.offset + i]));
          for (std::int64_t i = 0; i < v.size; ++i)
            ASSERT_LE(std::abs(s[i] - w.grads[v.offset + i]) / scale, kTol)
                << who << ": the sum over ranks of " << name << "[" << i << "]: " << s[i]
                << ", want " << w.grads[v.offset + i];
        }
        std::printf("sequence-parallel with vocabulary-parallel ends, %s: worst %.2e\n",
                    who.c_str(), worst.all);
      }
  }
}

// A shard whose seams cut the sequence: a sequence that does not split is
// refused naming the values, and so are seams that do not cut it (the
// embedding's leave then returns a row per token, not the stream's rows).
TEST(GptDecompositionTest, ASequenceCutBySeamsIsCheckedAtBothEnds) {
  const ModelConfig c = decomposable_gpt(true);
  const Whole w = whole_model(c);
  ModelShard shard = ModelShard::sequence(0, 2, SequenceSplit::kContiguous);
  shard.cut_by_seams = true;
  Gpt<double> gpt(c, shard);
  testing::expect_error(
      [&] { gpt.forward(w.params.data(), w.tokens.data(), w.targets.data(), kBatch, 15); },
      {"sequence of 15 tokens", "2 sequence shards"});
  testing::expect_error(
      [&] { gpt.forward(w.params.data(), w.tokens.data(), w.targets.data(), kBatch, kSeq); },
      {"Seams::leave(embedding) returned 768 values, not 384", "the seams cut the sequence"});
}

TEST(GptDecompositionTest, BlockwiseCoreOnTheWholeSequenceEqualsPlainAttention) {
  const ModelConfig c = decomposable_gpt(false);
  const Whole w = whole_model(c);
  struct Blockwise final : Seams<double> {
    BlockwiseAttention<double> core;
    AttentionCore<double>& attention() override { return core; }
  } seams;
  Gpt<double> gpt(c);
  gpt.set_seams(&seams);
  const double loss = gpt.forward(w.params.data(), w.tokens.data(), w.targets.data(), kBatch, kSeq);
  std::vector<double> grads(w.params.size(), 0.0);
  gpt.backward(w.params.data(), grads.data());
  EXPECT_NEAR(loss, w.loss, kTol * std::abs(w.loss));
  Worst worst;
  compare(w, w.layout, grads, worst, "blockwise core");
}

TEST(GptDecompositionTest, ASequenceShardOnThePlainCoreIsRefusedNamingTheRuns) {
  const ModelConfig c = decomposable_gpt(true);
  const Whole w = whole_model(c);
  Gpt<double> gpt(c, ModelShard::sequence(1, 2, SequenceSplit::kZigZag));
  try {
    gpt.forward(w.params.data(), w.tokens.data(), w.targets.data(), kBatch, kSeq / 2);
    FAIL() << "plain attention ran on a sequence shard";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("whole sequence"), std::string::npos) << e.what();
  }
}

TEST(GptDecompositionTest, ShardsThatDoNotDivideAreRefusedNamingTheValues) {
  const ModelConfig c = decomposable_gpt(true);
  EXPECT_THROW(ModelShard::tensor_slice(c, 0, 5), InvalidArgument);  // 12 heads over 5
  ModelShard s;
  s.heads = {3, 3};
  EXPECT_THROW(Gpt<double>(c, s), InvalidArgument);  // empty
  s.heads = {0, 13};
  EXPECT_THROW(Gpt<double>(c, s), InvalidArgument);  // beyond the heads
  // 16 tokens do not cut into 2·3 zig-zag chunks.
  EXPECT_THROW(ModelShard::sequence(0, 3, SequenceSplit::kZigZag).positions(16), InvalidArgument);
  try {
    ModelShard::tensor_slice(c, 0, 5);
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("12 heads"), std::string::npos) << e.what();
  }
}

TEST(GptDecompositionTest, ZigZagShardsHoldAnEarlyAndALateChunk) {
  const TokenRuns r = ModelShard::sequence(1, 4, SequenceSplit::kZigZag).positions(16);
  ASSERT_EQ(r.runs.size(), 2u);
  EXPECT_EQ(r.runs[0].begin, 2);  // chunk 1 of 8
  EXPECT_EQ(r.runs[1].begin, 12);  // chunk 2·4 − 1 − 1 = 6
  EXPECT_EQ(r.position(3), 13);
  const TokenRuns c = ModelShard::sequence(3, 4, SequenceSplit::kContiguous).positions(16);
  ASSERT_EQ(c.runs.size(), 1u);
  EXPECT_EQ(c.runs[0].begin, 12);
  EXPECT_EQ(c.runs[0].end, 16);
}

TEST(GptDecompositionTest, SlicesInitialiseAsTheWholeModelDoes) {
  const ModelConfig c = decomposable_gpt(false);
  const ParamLayout whole = param_layout(c);
  for (int r = 0; r < 3; ++r) {
    const ParamLayout local = param_layout(c, ModelShard::tensor_slice(c, r, 3));
    for (const ParamView& v : local.views()) {
      const ParamView& w = whole.find(v.name);
      for (std::int64_t i = 0; i < v.size; ++i)
        ASSERT_EQ(init_value(v, 5, i), init_value(w, 5, v.slice.whole_index(i)))
            << v.name << " local " << i;
    }
  }
}

// The ledger's activations are a count (Gpt::activation_bytes), not a
// measurement; here they are measured: after a forward, every rank holds
// exactly the bytes the count charges, whole, under tensor slices (the
// same rows as the residual) and under Megatron-SP (the sublayers keep the
// gathered whole sequence and their caches at its length, the residual and
// the norms the rank's T/t tokens; or, entering again in the backward, the
// caches without the gathered inputs).
TEST(GptDecompositionTest, ActivationBytesAreWhatEveryRankHoldsUnderTheSeams) {
  const ModelConfig c = decomposable_gpt(true);
  const Whole w = whole_model(c);
  {
    Gpt<double> gpt(c);
    gpt.forward(w.params.data(), w.tokens.data(), w.targets.data(), kBatch, kSeq);
    EXPECT_EQ(gpt.activation_bytes(every_unit(gpt), kBatch, kSeq), held_bytes(gpt.activations()))
        << "whole";
  }
  for (int mode = 0; mode < 3; ++mode) {
    const bool sp = mode > 0, again = mode == 2;
    for (int t : {1, 2, 4}) {
      const std::string who =
          std::string(!sp ? "tensor slices" : again ? "sequence-parallel, entered again"
                                                    : "sequence-parallel, inputs kept") +
          " t=" + std::to_string(t);
      LocalGroup group(t);
      std::vector<std::int64_t> charged(static_cast<std::size_t>(t)), held(charged);
      testing::run_shards(t, [&](int r) {
        ModelShard shard = ModelShard::tensor_slice(c, r, t);
        const std::int64_t l = sp ? kSeq / t : kSeq;
        std::vector<std::int32_t> tokens = w.tokens, targets = w.targets;
        if (sp) {
          // The vocabulary stays whole; the rank holds tokens [r·l, (r+1)·l).
          shard.vocab = ModelShard::whole().vocab;
          shard.sequence_shard = r;
          shard.sequence_shards = t;
          tokens.clear();
          targets.clear();
          for (std::int64_t b = 0; b < kBatch; ++b)
            for (std::int64_t i = 0; i < l; ++i) {
              tokens.push_back(w.tokens[b * kSeq + r * l + i]);
              targets.push_back(w.targets[b * kSeq + r * l + i]);
            }
        }
        Gpt<double> gpt(c, shard);
        const std::vector<double> p = testing::cut_params(w.layout, gpt.layout(), w.params);
        testing::TensorParallelSeams tp(group, r);
        testing::SequenceParallelSeams seq(group, r, kBatch, kSeq, c.dim, again);
        if (sp) gpt.set_seams(&seq);
        else gpt.set_seams(&tp);
        gpt.forward(p.data(), tokens.data(), targets.data(), kBatch, l);
        charged[r] = gpt.activation_bytes(every_unit(gpt), kBatch, l);
        held[r] = held_bytes(gpt.activations());
        gpt.set_seams(nullptr);
      });
      for (int r = 0; r < t; ++r) EXPECT_EQ(charged[r], held[r]) << who << " rank " << r;
    }
  }
}

// A seam that hands a sublayer a new input without declaring it in
// sublayer_input would make the ledger wrong; the block refuses it.
TEST(GptDecompositionTest, AnUndeclaredNewSublayerInputIsRefused) {
  const ModelConfig c = decomposable_gpt(true);
  const Whole w = whole_model(c);
  struct Copying final : Seams<double> {
    std::span<const double> enter(Site, int, std::span<const double> x,
                                  dtw::kernels::Vector<double>& buffer) override {
      buffer.assign(x.begin(), x.end());
      return buffer;
    }
  } seams;
  Gpt<double> gpt(c);
  gpt.set_seams(&seams);
  try {
    gpt.forward(w.params.data(), w.tokens.data(), w.targets.data(), kBatch, kSeq);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("sublayer_input declares"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dtw::model
