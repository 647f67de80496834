// Steps 06.1-06.4: the operators and the layers, each forward and backward
// on t ranks against the single-device layer in double (1e-12), for t in
// {1, 2, 3, 4}, and the collectives each one makes, counted from the
// traffic record: number of messages and bytes, exactly.
#include <limits>

#include "dtw/kernels/activations.h"
#include "dtw/model/gpt_layers.h"
#include "tp_test.h"

namespace dtw::ch06 {
namespace {

using testing::divisible_gpt;
using testing::expect_allreduces;
using testing::expect_near;
using testing::on_ranks;
using testing::random_values;
using testing::Sent;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The sum over t ranks of random_values(n, seed + q).
std::vector<double> sum_over_ranks(int t, std::int64_t n, std::uint64_t seed) {
  std::vector<double> want(static_cast<std::size_t>(n), 0.0);
  for (int q = 0; q < t; ++q) {
    const auto v = random_values(n, seed + static_cast<std::uint64_t>(q));
    for (std::size_t i = 0; i < want.size(); ++i) want[i] += v[i];
  }
  return want;
}

// ---- 06.1 -------------------------------------------------------------------------

DTW_TEST_STEPS(ConjugatesTest, "06.1");
TEST(ConjugatesTest, GForwardAndFBackwardSumFForwardAndGBackwardSendNothing) {
  for (int t : {1, 2, 3, 4}) {
    DTW_TRACE("f and g, t " << t << ", 7 values");
    on_ranks(t, [&](Comm& group) {
      const int r = group.rank();
      const std::vector<double> want = sum_over_ranks(t, 7, 100);
      const std::vector<double> mine = random_values(7, 100 + r);
      std::vector<double> x = mine;
      Sent before = Sent::now(group);
      f_forward(group, std::span<const double>(x));
      EXPECT_EQ((Sent::now(group) - before).messages, 0)
          << "rank " << r << ": f forward sent messages; it is the identity (every rank holds "
             "the whole input)";
      before = Sent::now(group);
      g_backward(group, std::span<const double>(x));
      EXPECT_EQ((Sent::now(group) - before).messages, 0)
          << "rank " << r << ": g backward sent messages; it is the identity (every rank holds "
             "the whole dy)";
      EXPECT_EQ(x, mine) << "f forward and g backward are identities";
      before = Sent::now(group);
      g_forward(group, std::span<double>(x));
      expect_near(r, want, x, "g forward: the sum over the group");
      expect_allreduces(group, Sent::now(group) - before, 1, 7, "g forward");
      x = mine;
      before = Sent::now(group);
      f_backward(group, std::span<double>(x));
      expect_near(r, want, x, "f backward: the sum over the group");
      expect_allreduces(group, Sent::now(group) - before, 1, 7, "f backward");
    });
  }
}

// What the GPT calls (MegatronSeams): at every site, enter = f, leave = g,
// leave_backward = g', enter_backward = f'.
DTW_TEST_STEPS(MegatronSeamsTest, "06.1");
TEST(MegatronSeamsTest, LeaveIsGAndEnterBackwardIsFsBackwardAtEverySite) {
  const std::int64_t n = 9;
  for (int t : {1, 2, 3}) {
    DTW_TRACE("Megatron seams, t " << t << ", " << n << " values");
    on_ranks(t, [&](Comm& group) {
      const int r = group.rank();
      const std::vector<double> want = sum_over_ranks(t, n, 300);
      const std::vector<double> mine = random_values(n, 300 + r);
      MegatronSeams<double> seams(group);
      kernels::Vector<double> buffer;
      for (model::Site site : {model::Site::kEmbedding, model::Site::kAttention, model::Site::kMlp,
                               model::Site::kHead}) {
        const std::string at = std::string(" at the ") + model::name_of(site);
        for (int layer : {0, 1}) {
          std::vector<double> x = mine;
          Sent before = Sent::now(group);
          std::span<const double> out = seams.enter(site, layer, std::span<const double>(x), buffer);
          EXPECT_EQ((Sent::now(group) - before).messages, 0)
              << "rank " << r << ": enter (f forward)" << at << " sent messages; f forward is "
                 "the identity";
          expect_near(r, mine, {out.begin(), out.end()}, "enter (f forward)" + at + ": x unchanged");
          before = Sent::now(group);
          out = seams.leave(site, layer, std::span<double>(x), buffer);
          expect_near(r, want, {out.begin(), out.end()},
                      "leave (g forward)" + at + ": the partial outputs summed over the group");
          expect_allreduces(group, Sent::now(group) - before, 1, n, "leave (g forward)" + at);
          x = mine;
          before = Sent::now(group);
          out = seams.leave_backward(site, layer, std::span<const double>(x), buffer);
          EXPECT_EQ((Sent::now(group) - before).messages, 0)
              << "rank " << r << ": leave_backward (g backward)" << at << " sent messages; g "
                 "backward is the identity";
          expect_near(r, mine, {out.begin(), out.end()}, "leave_backward (g backward)" + at + ": dy unchanged");
          before = Sent::now(group);
          out = seams.enter_backward(site, layer, std::span<double>(x), buffer);
          expect_near(r, want, {out.begin(), out.end()},
                      "enter_backward (f backward)" + at + ": the partial dx summed over the group");
          expect_allreduces(group, Sent::now(group) - before, 1, n, "enter_backward (f backward)" + at);
        }
      }
    });
  }
}

// ---- 06.2 -------------------------------------------------------------------------

DTW_TEST_STEPS(EvenSliceTest, "06.2");
TEST(EvenSliceTest, EachRankHoldsItsEqualPartInRankOrder) {
  for (std::int64_t extent : {12, 24, 240}) {
    for (int t : {1, 2, 3, 4}) {
      DTW_TRACE("even slice of " << extent << " heads, t " << t);
      for (int r = 0; r < t; ++r) {
        const model::IndexRange s = even_slice(extent, r, t, "heads");
        EXPECT_EQ(s.begin, r * extent / t) << "rank " << r << " of " << t << ": the first of "
                                           << extent << " (rank r starts after r·extent/t)";
        EXPECT_EQ(s.end, (r + 1) * extent / t)
            << "rank " << r << " of " << t << ": one past the last of " << extent
            << " (each rank holds extent/t = " << extent / t << ")";
      }
    }
  }
}


// y = x Wᵀ + b on one device, and its backward.
struct Linear {
  std::vector<double> x, w, b, dy, y, dx, dw, db;
  Linear(std::int64_t rows, std::int64_t in, std::int64_t out)
      : x(random_values(rows * in, 1)), w(random_values(out * in, 2)), b(random_values(out, 3)),
        dy(random_values(rows * out, 4)), y(rows * out), dx(rows * in), dw(out * in, 0.0),
        db(out, 0.0) {
    model::linear_forward(y.data(), x.data(), w.data(), b.data(), rows, in, out);
    model::linear_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), rows, in,
                           out);
  }
};

// Columns [c0, c0 + n) of a row-major [rows, cols] matrix.
std::vector<double> columns(const std::vector<double>& m, std::int64_t cols, std::int64_t c0,
                            std::int64_t n) {
  std::vector<double> out;
  for (std::size_t i = 0; i < m.size(); i += static_cast<std::size_t>(cols))
    out.insert(out.end(), m.begin() + static_cast<std::ptrdiff_t>(i + c0),
               m.begin() + static_cast<std::ptrdiff_t>(i + c0 + n));
  return out;
}
std::vector<double> rows_of(const std::vector<double>& m, std::int64_t width, std::int64_t r0,
                            std::int64_t n) {
  return {m.begin() + r0 * width, m.begin() + (r0 + n) * width};
}

DTW_TEST_STEPS(ParallelLinearTest, "06.1", "06.2");
TEST(ParallelLinearTest, ColumnParallelEqualsTheWholeLayerAndSumsOnlyDxBackward) {
  const std::int64_t rows = 5, in = 12, out = 24;
  const Linear whole(rows, in, out);
  for (int t : {1, 2, 3, 4}) {
    DTW_TRACE("column-parallel linear, t " << t << ", [" << rows << ", " << in << "] x [" << out
                                           << ", " << in << "]ᵀ");
    on_ranks(t, [&](Comm& group) {
      const int r = group.rank();
      const std::int64_t o = out / t, o0 = r * o;
      const std::vector<double> w = rows_of(whole.w, in, o0, o), b = rows_of(whole.b, 1, o0, o);
      std::vector<double> y(rows * o, kNaN), dx(rows * in, kNaN), dw(o * in, 0.0), db(o, 0.0);
      Sent before = Sent::now(group);
      column_parallel_forward<double>(group, y.data(), whole.x.data(), w.data(), b.data(), {rows, in, o});
      EXPECT_EQ((Sent::now(group) - before).messages, 0) << "column-parallel forward sends nothing";
      expect_near(r, columns(whole.y, out, o0, o), y, "y's columns");
      const std::vector<double> dy = columns(whole.dy, out, o0, o);
      before = Sent::now(group);
      column_parallel_backward<double>(group, dx.data(), dw.data(), db.data(), dy.data(),
                                       whole.x.data(), w.data(), {rows, in, o});
      expect_allreduces(group, Sent::now(group) - before, 1, rows * in, "column-parallel backward");
      expect_near(r, whole.dx, dx, "dx");
      expect_near(r, rows_of(whole.dw, in, o0, o), dw, "dW's rows");
      expect_near(r, rows_of(whole.db, 1, o0, o), db, "db's rows");
    });
  }
}

TEST(ParallelLinearTest, RowParallelEqualsTheWholeLayerWithTheBiasAddedOnce) {
  const std::int64_t rows = 5, in = 24, out = 12;
  const Linear whole(rows, in, out);
  for (int t : {1, 2, 3, 4}) {
    DTW_TRACE("row-parallel linear, t " << t << ", [" << rows << ", " << in << "] x [" << out
                                        << ", " << in << "]ᵀ");
    on_ranks(t, [&](Comm& group) {
      const int r = group.rank();
      const std::int64_t i = in / t, i0 = r * i;
      const std::vector<double> x = columns(whole.x, in, i0, i), w = columns(whole.w, in, i0, i);
      std::vector<double> y(rows * out, kNaN), dx(rows * i, kNaN), dw(out * i, 0.0), db(out, 0.0);
      Sent before = Sent::now(group);
      row_parallel_forward<double>(group, y.data(), x.data(), w.data(), whole.b.data(), {rows, i, out});
      expect_allreduces(group, Sent::now(group) - before, 1, rows * out, "row-parallel forward");
      expect_near(r, whole.y, y, "y (the bias added once, after the sum)");
      before = Sent::now(group);
      row_parallel_backward<double>(group, dx.data(), dw.data(), db.data(), whole.dy.data(),
                                    x.data(), w.data(), {rows, i, out});
      EXPECT_EQ((Sent::now(group) - before).messages, 0) << "row-parallel backward sends nothing";
      expect_near(r, columns(whole.dx, in, i0, i), dx, "dx's columns");
      expect_near(r, columns(whole.dw, in, i0, i), dw, "dW's columns");
      expect_near(r, whole.db, db, "db (whole on every rank)");
    });
  }
}

// ---- 06.3 and 06.4: the sublayers of block 0 of a GPT every t divides ---------------

struct Block {
  model::ModelConfig c = divisible_gpt();
  std::int64_t batch = 2, seq = 16;
  model::ParamLayout layout = model::param_layout(c);
  std::vector<double> params = random_values(layout.size(), 21);
  std::vector<double> x = random_values(batch * seq * c.dim, 22);
  std::vector<double> dy = random_values(batch * seq * c.dim, 23);
  std::int64_t rows() const { return batch * seq; }
};

// What a shard holds of block 0, and its gradients.
struct Local {
  model::ParamLayout layout;
  std::vector<double> params, grads;
  Local(const Block& b, int r, int t)
      : layout(model::param_layout(b.c, testing::test_shard(b.c, r, t))),
        params(testing::cut(b.layout, layout, b.params)), grads(params.size(), 0.0) {}
  model::BlockWeights<const double> w() const {
    return model::block_weights(layout, 0, static_cast<const double*>(params.data()));
  }
  model::BlockWeights<double> g() { return model::block_weights(layout, 0, grads.data()); }
};

// Expects the local gradients of block 0's tensors named `part` to be the
// whole's, through each view's slice.
void expect_grads(int r, const Block& b, const std::vector<double>& whole_grads, const Local& l,
                  const std::string& part) {
  for (const model::ParamView& v : l.layout.views()) {
    if (v.layer != 0 || v.name.find(part) == std::string::npos) continue;
    const model::ParamView& w = b.layout.find(v.name);
    std::vector<double> want, got;
    for (std::int64_t i = 0; i < v.size; ++i) {
      want.push_back(whole_grads[w.offset + v.slice.whole_index(i)]);
      got.push_back(l.grads[v.offset + i]);
    }
    expect_near(r, want, got, "gradient of " + v.name);
  }
}

DTW_TEST_STEPS(ParallelMlpTest, "06.1", "06.2", "06.3");
TEST(ParallelMlpTest, EqualsTheWholeMlpWithOneAllreduceEachWay) {
  const Block b;
  const model::BlockDims d = model::block_dims(b.c, b.batch, b.seq);
  const auto w = model::block_weights(b.layout, 0, static_cast<const double*>(b.params.data()));
  std::vector<double> grads(b.params.size(), 0.0), y(b.x.size()), dx(b.x.size());
  std::vector<double> scratch(model::mlp_sublayer_scratch_size(d));
  model::MlpCache<double> cache;
  model::mlp_sublayer_forward(y.data(), cache, b.x.data(), w.mlp, d);
  model::mlp_sublayer_backward(dx.data(), model::block_weights(b.layout, 0, grads.data()).mlp,
                               b.dy.data(), b.x.data(), cache, w.mlp, d, scratch.data());
  for (int t : {1, 2, 3, 4}) {
    DTW_TRACE("parallel MLP, t " << t << ", " << b.rows() << " rows of " << b.c.dim
                                 << ", hidden " << b.c.mlp_hidden);
    on_ranks(t, [&](Comm& group) {
      const int r = group.rank();
      Local l(b, r, t);
      MlpActivations<double> acts;
      std::vector<double> ly(y.size(), kNaN), ldx(dx.size(), kNaN);  // outputs are overwritten
      const std::int64_t f = b.c.mlp_hidden / t;
      Sent before = Sent::now(group);
      parallel_mlp_forward<double>(group, ly.data(), acts, b.x.data(), l.w().mlp, b.rows(), b.c.dim, f);
      expect_allreduces(group, Sent::now(group) - before, 1, b.rows() * b.c.dim, "MLP forward");
      expect_near(r, y, ly, "the MLP's output");
      before = Sent::now(group);
      parallel_mlp_backward<double>(group, ldx.data(), l.g().mlp, b.dy.data(), b.x.data(), acts,
                                    l.w().mlp, b.rows(), b.c.dim, f);
      expect_allreduces(group, Sent::now(group) - before, 1, b.rows() * b.c.dim, "MLP backward");
      expect_near(r, dx, ldx, "the MLP's input gradient");
      expect_grads(r, b, grads, l, "mlp.");
    });
  }
}

DTW_TEST_STEPS(ParallelAttentionTest, "06.1", "06.2", "06.4");
TEST(ParallelAttentionTest, EqualsTheWholeAttentionWithOneAllreduceEachWay) {
  const Block b;
  const model::BlockDims d = model::block_dims(b.c, b.batch, b.seq);
  const auto w = model::block_weights(b.layout, 0, static_cast<const double*>(b.params.data()));
  std::vector<double> grads(b.params.size(), 0.0), y(b.x.size()), dx(b.x.size());
  std::vector<double> scratch(model::attention_sublayer_scratch_size(d));
  model::AttentionCache<double> cache;
  model::attention_sublayer_forward(y.data(), cache, b.x.data(), w.attn, d);
  model::attention_sublayer_backward(dx.data(), model::block_weights(b.layout, 0, grads.data()).attn,
                                     b.dy.data(), b.x.data(), cache, w.attn, d, scratch.data());
  // Two cores: the plain one keeps the probabilities; the blockwise one keeps
  // the log-sum-exp and needs the forward's output in its backward.
  for (const bool blockwise : {false, true})
  for (int t : {1, 2, 3, 4}) {
    DTW_TRACE("parallel attention, t " << t << ", " << b.c.heads << " heads, batch " << b.batch
                                       << ", seq " << b.seq << ", "
                                       << (blockwise ? "BlockwiseAttention" : "PlainAttention"));
    on_ranks(t, [&](Comm& group) {
      const int r = group.rank();
      Local l(b, r, t);
      AttentionActivations<double> acts;
      model::PlainAttention<double> plain;
      model::BlockwiseAttention<double> blocks;
      model::AttentionCore<double>& core = blockwise ? static_cast<model::AttentionCore<double>&>(blocks)
                                                     : plain;
      const AttentionDims ad{b.batch, b.seq, b.c.dim, b.c.heads / t, b.c.dim / b.c.heads};
      std::vector<double> ly(y.size(), kNaN), ldx(dx.size(), kNaN);  // outputs are overwritten
      Sent before = Sent::now(group);
      parallel_attention_forward<double>(group, ly.data(), acts, b.x.data(), l.w().attn, ad, core);
      expect_allreduces(group, Sent::now(group) - before, 1, b.rows() * b.c.dim, "attention forward");
      expect_near(r, y, ly, "the attention's output");
      before = Sent::now(group);
      parallel_attention_backward<double>(group, ldx.data(), l.g().attn, b.dy.data(), b.x.data(),
                                          acts, l.w().attn, ad, core);
      expect_allreduces(group, Sent::now(group) - before, 1, b.rows() * b.c.dim, "attention backward");
      expect_near(r, dx, ldx, "the attention's input gradient");
      expect_grads(r, b, grads, l, "attn.");
    });
  }
}

// ---- bad input -----------------------------------------------------------------------

DTW_TEST_STEPS(SliceArgumentsTest);
TEST(SliceArgumentsTest, HeadsOrAVocabularyThatDoNotSplitAreNamedWithTheRank) {
  const model::ModelConfig c = train::standard_run("gpt-tiny").config();  // 4 heads, 256 units
  testing::expect_error([&] { megatron_shard(c, 2, 3); }, {"rank 2", "4 heads", "t = 3"});
  testing::expect_error([&] { vocab_slice(3, 0, 4); }, {"rank 0", "vocabulary of 3", "t = 4"});
}

// The heads split (step 06.2's code runs), then the hidden units do not.
DTW_TEST_STEPS(HiddenSliceArgumentsTest, "06.2");
TEST(HiddenSliceArgumentsTest, HiddenUnitsThatDoNotDivideAreNamedWithTheRank) {
  model::ModelConfig odd = train::standard_run("gpt-tiny").config();
  odd.mlp_hidden = 258;
  testing::expect_error([&] { megatron_shard(odd, 1, 4); },
                        {"rank 1", "258 MLP hidden units", "t = 4"});
}

}  // namespace
}  // namespace dtw::ch06
