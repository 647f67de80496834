// Every GPT layer's backward pass against central finite differences, in
// double: the attention sublayer, the MLP sublayer, a whole block, the
// embedding and the head with its loss; and the documented head layout
// (splitting the sublayers by heads or hidden units sums to the whole).
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "dtw/model/gpt_layers.h"
#include "gradcheck.h"
#include "model_test_util.h"

namespace dtw::model {
namespace {

using testing::cptr;
using testing::gradients_match;
using testing::numeric_gradient;
using testing::project;
using testing::random_vector;

// (batch, seq) pairs: a single token, a single odd-length sequence, a full batch.
const std::pair<std::int64_t, std::int64_t> kShapes[] = {{1, 1}, {1, 3}, {2, 5}};

// The backward pass of y = f(x; p) against the finite-difference gradient of
// L = Σ w·y with respect to x and to the whole parameter vector: parameters a
// layer does not own must get exactly zero from both sides.
struct Check {
  std::vector<double> x, p, w;
  template <class Forward>
  void run(const char* what, Forward forward, const std::vector<double>& dx,
           const std::vector<double>& dp) {
    auto loss = [&] { return project(w, forward()); };
    EXPECT_TRUE(gradients_match(std::string(what) + " dx", dx, numeric_gradient(x, loss)));
    EXPECT_TRUE(gradients_match(std::string(what) + " dparams", dp, numeric_gradient(p, loss)));
  }
};

TEST(GptLayersTest, AttentionSublayerBackwardMatchesFiniteDifferences) {
  const ModelConfig c = testing::gradcheck_gpt();
  const ParamLayout layout = param_layout(c);
  for (auto [batch, seq] : kShapes) {
    const BlockDims d = block_dims(c, batch, seq);
    const std::int64_t n = d.rows() * d.dim;
    Check k{random_vector(n, 1), testing::random_params(layout, 2), random_vector(n, 3)};
    auto forward = [&] {
      AttentionCache<double> cache;
      std::vector<double> y(static_cast<std::size_t>(n));
      attention_sublayer_forward(y.data(), cache, cptr(k.x),
                                 block_weights(layout, 1, cptr(k.p)).attn, d);
      return y;
    };
    AttentionCache<double> cache;
    std::vector<double> y(n), dx(n), dp(k.p.size()), scratch(attention_sublayer_scratch_size(d));
    const auto w = block_weights(layout, 1, cptr(k.p));
    attention_sublayer_forward(y.data(), cache, cptr(k.x), w.attn, d);
    attention_sublayer_backward(dx.data(), block_weights(layout, 1, dp.data()).attn, cptr(k.w),
                                cptr(k.x), cache, w.attn, d, scratch.data());
    SCOPED_TRACE("batch " + std::to_string(batch) + ", seq " + std::to_string(seq));
    k.run("attention", forward, dx, dp);
  }
}

TEST(GptLayersTest, MlpSublayerBackwardMatchesFiniteDifferences) {
  const ModelConfig c = testing::gradcheck_gpt();
  const ParamLayout layout = param_layout(c);
  for (auto [batch, seq] : kShapes) {
    const BlockDims d = block_dims(c, batch, seq);
    const std::int64_t n = d.rows() * d.dim;
    Check k{random_vector(n, 4), testing::random_params(layout, 5), random_vector(n, 6)};
    auto forward = [&] {
      MlpCache<double> cache;
      std::vector<double> y(static_cast<std::size_t>(n));
      mlp_sublayer_forward(y.data(), cache, cptr(k.x), block_weights(layout, 0, cptr(k.p)).mlp, d);
      return y;
    };
    MlpCache<double> cache;
    std::vector<double> y(n), dx(n), dp(k.p.size()), scratch(mlp_sublayer_scratch_size(d));
    const auto w = block_weights(layout, 0, cptr(k.p));
    mlp_sublayer_forward(y.data(), cache, cptr(k.x), w.mlp, d);
    mlp_sublayer_backward(dx.data(), block_weights(layout, 0, dp.data()).mlp, cptr(k.w), cptr(k.x),
                          cache, w.mlp, d, scratch.data());
    SCOPED_TRACE("batch " + std::to_string(batch) + ", seq " + std::to_string(seq));
    k.run("mlp", forward, dx, dp);
  }
}

TEST(GptLayersTest, BlockBackwardMatchesFiniteDifferences) {
  const ModelConfig c = testing::gradcheck_gpt();
  const ParamLayout layout = param_layout(c);
  for (auto [batch, seq] : kShapes) {
    const BlockDims d = block_dims(c, batch, seq);
    const std::int64_t n = d.rows() * d.dim;
    Check k{random_vector(n, 7), testing::random_params(layout, 8), random_vector(n, 9)};
    auto forward = [&] {
      BlockCache<double> cache;
      std::vector<double> y(static_cast<std::size_t>(n));
      block_forward(y.data(), cache, cptr(k.x), block_weights(layout, 1, cptr(k.p)), d);
      return y;
    };
    BlockCache<double> cache;
    std::vector<double> y(n), dp(k.p.size()), scratch(block_scratch_size(d));
    block_forward(y.data(), cache, cptr(k.x), block_weights(layout, 1, cptr(k.p)), d);
    // dx_in shares dx_out's memory, as the header allows.
    std::vector<double> dx = k.w;
    block_backward(dx.data(), block_weights(layout, 1, dp.data()), cptr(dx), cptr(k.x), cache,
                   block_weights(layout, 1, cptr(k.p)), d, scratch.data());
    SCOPED_TRACE("batch " + std::to_string(batch) + ", seq " + std::to_string(seq));
    k.run("block", forward, dx, dp);
  }
}

TEST(GptLayersTest, EmbeddingBackwardMatchesFiniteDifferences) {
  const ModelConfig c = testing::gradcheck_gpt();
  const ParamLayout layout = param_layout(c);
  // A shard starting mid-sequence (offset 2) exercises the position offset.
  for (auto [seq, offset] : {std::pair<std::int64_t, std::int64_t>{5, 0}, {1, 4}, {3, 2}}) {
    const std::int64_t batch = 2, n = batch * seq * c.dim;
    const std::vector<std::int32_t> tokens = testing::random_tokens(batch * seq, c.vocab, 10);
    std::vector<double> p = testing::random_params(layout, 11);
    const std::vector<double> w = random_vector(n, 12);
    const std::int64_t wte = layout.find("wte").offset, wpe = layout.find("wpe").offset;
    auto forward = [&] {
      std::vector<double> x(static_cast<std::size_t>(n));
      embed_forward(x.data(), tokens.data(), cptr(p) + wte, cptr(p) + wpe, c, batch, seq, offset);
      return x;
    };
    std::vector<double> dp(p.size());
    embed_backward(dp.data() + wte, dp.data() + wpe, w.data(), tokens.data(), c, batch, seq,
                   offset);
    SCOPED_TRACE("seq " + std::to_string(seq) + ", offset " + std::to_string(offset));
    EXPECT_TRUE(gradients_match("embedding dparams", dp,
                                numeric_gradient(p, [&] { return project(w, forward()); })));
  }
}

TEST(GptLayersTest, HeadAndLossBackwardMatchFiniteDifferences) {
  for (bool tied : {true, false}) {
    const ModelConfig c = testing::gradcheck_gpt(tied);
    const ParamLayout layout = param_layout(c);
    for (std::int64_t rows : {1, 7}) {
      const std::vector<std::int32_t> targets = testing::random_tokens(rows, c.vocab, 13);
      std::vector<double> x = random_vector(rows * c.dim, 14);
      std::vector<double> p = testing::random_params(layout, 15);
      // d(mean loss) = 1/rows per row; a further factor 0.7 checks that dloss scales.
      const double scale = 0.7;
      auto loss = [&] {
        HeadCache<double> cache;
        return scale * head_forward(cache, cptr(x), targets.data(),
                                    head_weights(layout, tied, cptr(p)), rows, c.dim, c.vocab);
      };
      HeadCache<double> cache;
      head_forward(cache, cptr(x), targets.data(), head_weights(layout, tied, cptr(p)), rows, c.dim,
                   c.vocab);
      std::vector<double> dx(x.size()), dp(p.size()),
          scratch(head_scratch_size(rows, c.dim, c.vocab));
      head_backward(dx.data(), head_weights(layout, tied, dp.data()), cptr(x), targets.data(),
                    cache, head_weights(layout, tied, cptr(p)), rows, c.dim, c.vocab,
                    scale / static_cast<double>(rows), scratch.data());
      SCOPED_TRACE(std::string(tied ? "tied" : "untied") + ", rows " + std::to_string(rows));
      EXPECT_TRUE(gradients_match("head dx", dx, numeric_gradient(x, loss)));
      EXPECT_TRUE(gradients_match("head dparams", dp, numeric_gradient(p, loss)));
    }
  }
}

TEST(GptLayersTest, LinearBackwardMatchesFiniteDifferencesWithAndWithoutBias) {
  for (bool bias : {true, false}) {
    const std::int64_t rows = 3, in = 5, out = 4;
    std::vector<double> x = random_vector(rows * in, 16);
    std::vector<double> p = random_vector(out * in + out, 17);  // W then b
    const std::vector<double> w = random_vector(rows * out, 18);
    auto forward = [&] {
      std::vector<double> y(static_cast<std::size_t>(rows * out));
      linear_forward(y.data(), cptr(x), cptr(p), bias ? cptr(p) + out * in : nullptr, rows, in,
                     out);
      return y;
    };
    std::vector<double> dx(x.size()), dp(p.size());
    linear_backward(dx.data(), dp.data(), bias ? dp.data() + out * in : nullptr, w.data(), cptr(x),
                    cptr(p), rows, in, out);
    auto loss = [&] { return project(w, forward()); };
    EXPECT_TRUE(gradients_match("linear dx", dx, numeric_gradient(x, loss)));
    EXPECT_TRUE(gradients_match("linear dparams", dp, numeric_gradient(p, loss)));
  }
}

TEST(GptLayersTest, SplitQkvPlacesEachHeadAsDocumented) {
  const std::int64_t batch = 2, seq = 3, heads = 2, hd = 3, width = heads * hd;
  std::vector<double> qkv(batch * seq * 3 * width);
  for (std::size_t i = 0; i < qkv.size(); ++i) qkv[i] = static_cast<double>(i);
  const std::size_t n = static_cast<std::size_t>(batch * seq * width);
  std::vector<double> q(n), k(n), v(n), back(qkv.size());
  split_qkv(q.data(), k.data(), v.data(), cptr(qkv), batch, seq, heads, hd);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t t = 0; t < seq; ++t)
        for (std::int64_t e = 0; e < hd; ++e) {
          const std::int64_t at = ((b * heads + h) * seq + t) * hd + e;
          const std::int64_t row = (b * seq + t) * 3 * width;
          ASSERT_EQ(q[at], qkv[row + h * hd + e]) << "b " << b << " h " << h << " t " << t;
          ASSERT_EQ(k[at], qkv[row + width + h * hd + e]);
          ASSERT_EQ(v[at], qkv[row + 2 * width + h * hd + e]);
        }
  join_qkv(back.data(), cptr(q), cptr(k), cptr(v), batch, seq, heads, hd);
  EXPECT_EQ(back, qkv);
  std::vector<double> merged(n), again(n);
  merge_heads(merged.data(), cptr(q), batch, seq, heads, hd);
  split_heads(again.data(), cptr(merged), batch, seq, heads, hd);
  EXPECT_EQ(again, q);
}

}  // namespace
}  // namespace dtw::model
