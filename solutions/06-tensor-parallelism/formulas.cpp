// The chapter's cost model in code: what a rank holds and what it sends per
// step, written from the layer list, not measured. The tests hold the
// ledger and the traffic record to these figures exactly, and the
// registrations print them beside the measurements (dtw bench train).
#include "tensor_parallel.h"

namespace dtw::ch06 {
namespace {
std::int64_t vocab_rows(const model::ModelConfig& c, int r, int t, bool cut_vocab) {
  if (!cut_vocab) return c.vocab;
  const model::IndexRange v = vocab_slice(c.vocab, r, t);
  return v.end - v.begin;
}
// Values one rank sends in a ring allgather or reduce-scatter of n values in all.
std::int64_t ring_half_values(std::int64_t n, int t) {
  return n / t * (t - 1);  // callers pass n divisible by t
}
}  // namespace

std::int64_t replicated_params(const model::ModelConfig& c, bool cut_vocab) {
  const std::int64_t C = c.dim;
  // Per block: two norms (γ, β) and the two row-parallel biases.
  std::int64_t n = c.layers * (2 * 2 * C + 2 * C) + c.context * C + 2 * C;  // + wpe, lnf
  if (!cut_vocab) n += (model::head_is_tied(c) ? 1 : 2) * c.vocab * C;
  return n;
}

std::int64_t params_per_rank(const model::ModelConfig& c, int r, int t, bool cut_vocab) {
  const std::int64_t C = c.dim, F = c.mlp_hidden;
  // Per block, cut by t: W_qkv and b_qkv (3C rows), W_proj's C columns, W_fc and
  // b_fc (F rows), W_proj's F columns.
  const std::int64_t sliced_per_block = (3 * C * C + 3 * C + C * C + F * C + F + C * F) / t;
  std::int64_t n = c.layers * sliced_per_block + replicated_params(c, cut_vocab);
  if (cut_vocab) n += (model::head_is_tied(c) ? 1 : 2) * vocab_rows(c, r, t, true) * C;
  return n;
}

std::int64_t tp_activation_bytes(const model::ModelConfig& c, std::int64_t batch,
                                 std::int64_t seq, int r, int t, std::int64_t e) {
  const std::int64_t N = batch * seq, C = c.dim, W = C / t, F = c.mlp_hidden / t;
  const std::int64_t heads = c.heads / t, V = vocab_rows(c, r, t, true);
  // A block: LN1, mid, LN2 [N, C] and two mean/rstd pairs [N], whole on
  // every rank; qkv [N, 3W] and q, k, v, the head outputs and their merge
  // [N, W] each, the probabilities [B, heads/t, T, T] and the MLP's pre- and
  // post-GELU [N, F/t]: the rank's share only.
  const std::int64_t block = 3 * N * C + 4 * N + 8 * N * W + batch * heads * seq * seq + 2 * N * F;
  // Every block's input and the last output [N, C]; the head: LNf [N, C],
  // its mean, rstd and the per-row losses [N], logits and softmax [N, V/t].
  const std::int64_t values =
      (c.layers + 1) * N * C + c.layers * block + N * C + 3 * N + 2 * N * V;
  return values * e + 2 * N * 4;  // + the token and target ids (int32)
}

std::int64_t tp_sp_activation_bytes(const model::ModelConfig& c, std::int64_t batch,
                                    std::int64_t seq, int r, int t, std::int64_t e) {
  // n: the rank's rows (its seq/t tokens of every sequence); N: the whole
  // sequence's, which each sublayer and the head see after enter's all-gather.
  const std::int64_t n = batch * seq / t, N = batch * seq, C = c.dim, W = C / t;
  const std::int64_t F = c.mlp_hidden / t, heads = c.heads / t, V = vocab_rows(c, r, t, true);
  // A block: LN1, mid, LN2 [n, C] and two mean/rstd pairs [n] on the rank's
  // tokens; qkv [N, 3W], q, k, v, the head outputs and their merge [N, W],
  // the probabilities [B, heads/t, T, T] and the MLP's pre- and post-GELU
  // [N, F/t]: the whole sequence on the rank's heads and units. Not the
  // sublayers' gathered inputs: the backward gathers them again.
  const std::int64_t block =
      3 * n * C + 4 * n + 8 * N * W + batch * heads * seq * seq + 2 * N * F;
  // Every block's input and the last output [n, C]; the head: LNf [n, C]
  // and its mean and rstd [n] on the rank's tokens, then on every token the
  // logits and softmax of the rank's vocabulary columns [N, V/t] and the
  // per-row losses [N] (not the gathered input, gathered again).
  const std::int64_t values =
      (c.layers + 1) * n * C + c.layers * block + n * C + 2 * n + 2 * N * V + N;
  return values * e + 2 * N * 4;  // + the batch's token and target ids (int32)
}

std::int64_t ring_allreduce_values(std::int64_t n, int r, int t) {
  if (t == 1) return 0;
  // Chapter 01's ring: rank r sends every chunk but one in each half -- in
  // the reduce-scatter all but chunk r, in the allgather all but chunk r+1
  // (Chunks(n, t): the first n % t chunks one value larger).
  auto chunk = [&](int i) { return n / t + (i % t < n % t ? 1 : 0); };
  return 2 * n - chunk(r) - chunk(r + 1);
}

std::int64_t bytes_per_step(const model::ModelConfig& c, std::int64_t batch, std::int64_t seq,
                            int r, int t, bool sp, std::int64_t e) {
  const std::int64_t rows = batch * seq, n = rows * c.dim, L = c.layers;
  const std::int64_t scalar = 8 * ring_allreduce_values(1, r, t);  // a double
  if (!sp) {
    // Forward: the embedding's g, two g per block; backward: two f' per
    // block and the head's f'. The loss: row maxima and the 2·rows sums.
    return e * ((4 * L + 2) * ring_allreduce_values(n, r, t) + ring_allreduce_values(rows, r, t) +
                ring_allreduce_values(2 * rows, r, t)) +
           scalar;  // the clipping norm
  }
  // Per block, forward: two allgathers and two reduce-scatters of n;
  // backward: four allgathers (the gradients at the sublayers' outputs and
  // their inputs again) and two reduce-scatters. At the ends: the
  // embedding's reduce-scatter and its backward's allgather; the head's
  // allgather, again in the backward, and its backward's reduce-scatter.
  // The loss's maxima and sums, the replicated gradients once, the clipping
  // norm as a double.
  return e * ((10 * L + 5) * ring_half_values(n, t) + ring_allreduce_values(rows, r, t) +
              ring_allreduce_values(2 * rows, r, t) +
              ring_allreduce_values(replicated_params(c, true), r, t)) +
         scalar;
}

CollectiveCount collectives_per_step(const model::ModelConfig& c, bool sp) {
  if (!sp) return {4 * c.layers + 2 + 2 + 1, 0, 0};
  return {2 + 1 + 1, 6 * c.layers + 3, 4 * c.layers + 2};
}

std::int64_t messages_per_step(const model::ModelConfig& c, int t, bool sp) {
  const CollectiveCount k = collectives_per_step(c, sp);
  return (2 * k.allreduces + k.allgathers + k.reduce_scatters) * (t - 1);
}

}  // namespace dtw::ch06
