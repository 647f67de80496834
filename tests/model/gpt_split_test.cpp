// The sublayers split the way params.h documents for tensor parallelism: a
// rank owning some heads (or hidden units) takes the matching rows of the
// column-parallel weight and columns of the row-parallel one; the ranks'
// outputs and input gradients sum to the whole sublayer's, and their weight
// gradients are slices of the whole's.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "dtw/model/gpt_layers.h"
#include "gradcheck.h"
#include "model_test_util.h"

namespace dtw::model {
namespace {

using testing::cptr;
using testing::random_vector;

// Double sums of at most a few dozen terms, reordered: agreement to 1e-12.
constexpr double kTol = 1e-12;

// rows [r0, r0 + count) of a row-major matrix with `cols` columns.
std::vector<double> rows_of(const double* m, std::int64_t cols, std::int64_t r0,
                            std::int64_t count) {
  return std::vector<double>(m + r0 * cols, m + (r0 + count) * cols);
}
// columns [c0, c0 + count) of a rows × cols matrix.
std::vector<double> cols_of(const double* m, std::int64_t rows, std::int64_t cols, std::int64_t c0,
                            std::int64_t count) {
  std::vector<double> out;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = c0; c < c0 + count; ++c) out.push_back(m[r * cols + c]);
  return out;
}
void append(std::vector<double>& to, const std::vector<double>& from) {
  to.insert(to.end(), from.begin(), from.end());
}
void expect_near(const std::vector<double>& want, const std::vector<double>& got,
                 const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(want[i], got[i], kTol) << what << " index " << i;
}

TEST(GptSplitTest, AttentionSplitsByHeadsAsDocumented) {
  ModelConfig c = testing::gradcheck_gpt();
  c.heads = 4;  // head_dim 2; two ranks of two heads each
  const ParamLayout layout = param_layout(c);
  const std::vector<double> p = testing::random_params(layout, 21);
  const BlockDims full = block_dims(c, 2, 5);
  const std::int64_t N = full.rows(), C = c.dim, D = c.head_dim(), n = N * C;
  const std::vector<double> x = random_vector(n, 22), dy = random_vector(n, 23);
  const auto w = block_weights(layout, 0, cptr(p)).attn;

  AttentionCache<double> cache;
  std::vector<double> y(n), dx(n), dp(p.size()), scratch(attention_sublayer_scratch_size(full));
  attention_sublayer_forward(y.data(), cache, cptr(x), w, full);
  attention_sublayer_backward(dx.data(), block_weights(layout, 0, dp.data()).attn, cptr(dy),
                              cptr(x), cache, w, full, scratch.data());
  const auto g = block_weights(layout, 0, cptr(dp)).attn;

  const int ranks = 2;
  const std::int64_t local_heads = c.heads / ranks, W = local_heads * D;
  std::vector<double> y_sum(n, 0.0), dx_sum(n, 0.0);
  for (int r = 0; r < ranks; ++r) {
    // Column-parallel qkv: rows [r·W, (r+1)·W) of each of the q, k, v thirds.
    std::vector<double> qkv_w, qkv_b;
    for (int third = 0; third < 3; ++third) {
      append(qkv_w, rows_of(w.qkv_weight, C, third * C + r * W, W));
      append(qkv_b, rows_of(w.qkv_bias, 1, third * C + r * W, W));
    }
    // Row-parallel proj: columns [r·W, (r+1)·W); the bias is added once, after the sum.
    const std::vector<double> proj_w = cols_of(w.proj_weight, C, C, r * W, W);
    BlockDims d = full;
    d.heads = local_heads;
    AttentionWeights<const double> lw{qkv_w.data(), qkv_b.data(), proj_w.data(), nullptr};
    std::vector<double> gqkv_w(qkv_w.size()), gqkv_b(qkv_b.size()), gproj_w(proj_w.size());
    AttentionWeights<double> lg{gqkv_w.data(), gqkv_b.data(), gproj_w.data(), nullptr};
    AttentionCache<double> lc;
    std::vector<double> ly(n), ldx(n), ls(attention_sublayer_scratch_size(d));
    attention_sublayer_forward(ly.data(), lc, cptr(x), lw, d);
    attention_sublayer_backward(ldx.data(), lg, cptr(dy), cptr(x), lc, lw, d, ls.data());
    for (std::int64_t i = 0; i < n; ++i) {
      y_sum[i] += ly[i];
      dx_sum[i] += ldx[i];
    }
    std::vector<double> want_qkv_w, want_qkv_b;
    for (int third = 0; third < 3; ++third) {
      append(want_qkv_w, rows_of(g.qkv_weight, C, third * C + r * W, W));
      append(want_qkv_b, rows_of(g.qkv_bias, 1, third * C + r * W, W));
    }
    expect_near(want_qkv_w, gqkv_w, "rank " + std::to_string(r) + " dqkv.weight");
    expect_near(want_qkv_b, gqkv_b, "rank " + std::to_string(r) + " dqkv.bias");
    expect_near(cols_of(g.proj_weight, C, C, r * W, W), gproj_w,
                "rank " + std::to_string(r) + " dproj.weight");
  }
  for (std::int64_t i = 0; i < N; ++i)
    for (std::int64_t j = 0; j < C; ++j) y_sum[i * C + j] += w.proj_bias[j];
  expect_near(y, y_sum, "y");
  expect_near(dx, dx_sum, "dx");
}

TEST(GptSplitTest, MlpSplitsByHiddenUnits) {
  const ModelConfig c = testing::gradcheck_gpt();  // mlp_hidden 12: three ranks of 4
  const ParamLayout layout = param_layout(c);
  const std::vector<double> p = testing::random_params(layout, 24);
  const BlockDims full = block_dims(c, 1, 3);
  const std::int64_t N = full.rows(), C = c.dim, n = N * C;
  const std::vector<double> x = random_vector(n, 25), dy = random_vector(n, 26);
  const auto w = block_weights(layout, 1, cptr(p)).mlp;

  MlpCache<double> cache;
  std::vector<double> y(n), dx(n), dp(p.size()), scratch(mlp_sublayer_scratch_size(full));
  mlp_sublayer_forward(y.data(), cache, cptr(x), w, full);
  mlp_sublayer_backward(dx.data(), block_weights(layout, 1, dp.data()).mlp, cptr(dy), cptr(x),
                        cache, w, full, scratch.data());
  const auto g = block_weights(layout, 1, cptr(dp)).mlp;

  const int ranks = 3;
  const std::int64_t F = c.mlp_hidden / ranks;
  std::vector<double> y_sum(n, 0.0), dx_sum(n, 0.0);
  for (int r = 0; r < ranks; ++r) {
    const std::vector<double> fc_w = rows_of(w.fc_weight, C, r * F, F);
    const std::vector<double> fc_b = rows_of(w.fc_bias, 1, r * F, F);
    const std::vector<double> proj_w = cols_of(w.proj_weight, C, c.mlp_hidden, r * F, F);
    BlockDims d = full;
    d.mlp_hidden = F;
    std::vector<double> gfc_w(fc_w.size()), gfc_b(fc_b.size()), gproj_w(proj_w.size());
    MlpCache<double> lc;
    std::vector<double> ly(n), ldx(n), ls(mlp_sublayer_scratch_size(d));
    mlp_sublayer_forward(ly.data(), lc, cptr(x), {fc_w.data(), fc_b.data(), proj_w.data(), nullptr},
                         d);
    mlp_sublayer_backward(ldx.data(), {gfc_w.data(), gfc_b.data(), gproj_w.data(), nullptr},
                          cptr(dy), cptr(x), lc, {fc_w.data(), fc_b.data(), proj_w.data(), nullptr},
                          d, ls.data());
    for (std::int64_t i = 0; i < n; ++i) {
      y_sum[i] += ly[i];
      dx_sum[i] += ldx[i];
    }
    expect_near(rows_of(g.fc_weight, C, r * F, F), gfc_w, "dfc.weight");
    expect_near(rows_of(g.fc_bias, 1, r * F, F), gfc_b, "dfc.bias");
    expect_near(cols_of(g.proj_weight, C, c.mlp_hidden, r * F, F), gproj_w, "dproj.weight");
  }
  for (std::int64_t i = 0; i < N; ++i)
    for (std::int64_t j = 0; j < C; ++j) y_sum[i * C + j] += w.proj_bias[j];
  expect_near(y, y_sum, "y");
  expect_near(dx, dx_sum, "dx");
}

}  // namespace
}  // namespace dtw::model
