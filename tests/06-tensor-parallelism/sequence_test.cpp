// Step 06.6: Megatron sequence parallelism. The sequence all-gather and
// reduce-scatter put every rank's token range in its place for batches of
// several sequences, with exactly one allgather and one reduce-scatter of
// the activations' volume; the seams put them wherever f and g stood; a
// block with its norms on T/t tokens equals the whole block; the
// replicated gradients are summed in one allreduce.
#include <algorithm>
#include <cmath>

#include "dtw/model/gpt_layers.h"
#include "tp_test.h"

namespace dtw::ch06 {
namespace {

using testing::expect_near;
using testing::kTol;
using testing::on_ranks;
using testing::random_values;
using testing::Sent;

// Expects `got` [batch, len, dim] within kTol·max(1, |want|) of `want`;
// the first miss is named as a token of the whole sequence: which sequence,
// which token (the stretch [first, first + len) of it) and which rank's
// stretch of t it lies in, not a flat index.
void expect_tokens(int rank, const std::vector<double>& want, const std::vector<double>& got,
                   const std::string& what, std::int64_t len, std::int64_t first,
                   std::int64_t seq, int t, std::int64_t dim) {
  if (got.size() != want.size()) {
    ADD_FAILURE() << "rank " << rank << ": " << what << ": expected " << want.size()
                  << " values, got " << got.size();
    return;
  }
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::abs(got[i] - want[i]) <= kTol * std::max(1.0, std::abs(want[i]))) continue;
    const std::int64_t row = static_cast<std::int64_t>(i) / dim;
    const std::int64_t b = row / len, s = first + row % len;
    ADD_FAILURE() << "rank " << rank << ": " << what << ": sequence " << b << ", token " << s
                  << " (rank " << s / (seq / t) << "'s stretch of " << seq << "/" << t
                  << "), element " << static_cast<std::int64_t>(i) % dim << ": expected "
                  << want[i] << ", got " << got[i];
    return;
  }
}

DTW_TEST_STEPS(SequenceCollectivesTest, "06.6");
TEST(SequenceCollectivesTest, GatherAndScatterAlongTheSequenceOfEveryRow) {
  const std::int64_t batch = 3, seq = 12, dim = 5, n = batch * seq * dim;
  for (int t : {1, 2, 3, 4}) {
    DTW_TRACE("sequence allgather and reduce-scatter, t " << t << ", batch " << batch << ", seq "
                                                          << seq << ", dim " << dim);
    on_ranks(t, [&](Comm& group) {
      const int r = group.rank();
      const std::int64_t l = seq / t;
      // Each rank's whole partial activations; the sum over ranks of every token.
      std::vector<double> sum(n, 0.0);
      for (int q = 0; q < t; ++q) {
        const auto v = random_values(n, 50 + q);
        for (std::int64_t i = 0; i < n; ++i) sum[i] += v[i];
      }
      std::vector<double> partial = random_values(n, 50 + r), local(n / t), want;
      for (std::int64_t b = 0; b < batch; ++b)
        want.insert(want.end(), sum.begin() + (b * seq + r * l) * dim,
                    sum.begin() + (b * seq + (r + 1) * l) * dim);
      Sent before = Sent::now(group);
      sequence_reduce_scatter<double>(group, local, partial, batch, seq, dim);
      Sent sent = Sent::now(group) - before;
      expect_tokens(r, want, local, "the sum of the rank's tokens", l, r * l, seq, t, dim);
      EXPECT_EQ(sent.messages, t - 1) << "rank " << r << ": one ring reduce-scatter";
      EXPECT_EQ(sent.bytes, 8 * n / t * (t - 1)) << "rank " << r << ": (t-1)/t of the volume";
      std::vector<double> whole(n);
      before = Sent::now(group);
      sequence_allgather<double>(group, whole, local, batch, seq, dim);
      sent = Sent::now(group) - before;
      expect_tokens(r, sum, whole, "every rank's tokens in their place", seq, 0, seq, t, dim);
      EXPECT_EQ(sent.messages, t - 1) << "rank " << r << ": one ring allgather";
      EXPECT_EQ(sent.bytes, 8 * n / t * (t - 1)) << "rank " << r << ": (t-1)/t of the volume";
    });
  }
}

// What the GPT calls under tp-sp (SequenceParallelSeams): wherever tp's f
// stood (before a block's sublayers and the head) an allgather forward and a
// reduce-scatter backward; wherever g stood (after the sublayers and the
// embedding) a reduce-scatter forward and an allgather backward; elsewhere
// nothing.
DTW_TEST_STEPS(SequenceParallelSeamsTest, "06.6");
TEST(SequenceParallelSeamsTest, WhereFStoodTheyGatherWhereGStoodTheyReduceScatter) {
  const std::int64_t batch = 2, seq = 6, dim = 3, n = batch * seq * dim;
  using model::Site;
  for (int t : {1, 2, 3}) {
    DTW_TRACE("sequence-parallel seams, t " << t << ", batch " << batch << ", seq " << seq);
    on_ranks(t, [&](Comm& group) {
      const int r = group.rank();
      const std::int64_t l = seq / t;
      // The whole activations, every rank's token range of them, and the sum
      // over ranks of the rank's tokens of each rank's partial whole.
      const std::vector<double> whole = random_values(n, 80);
      std::vector<double> sum(n, 0.0), mine, sum_mine;
      for (int q = 0; q < t; ++q) {
        const auto v = random_values(n, 90 + q);
        for (std::int64_t i = 0; i < n; ++i) sum[i] += v[i];
      }
      for (std::int64_t b = 0; b < batch; ++b) {
        mine.insert(mine.end(), whole.begin() + (b * seq + r * l) * dim,
                    whole.begin() + (b * seq + (r + 1) * l) * dim);
        sum_mine.insert(sum_mine.end(), sum.begin() + (b * seq + r * l) * dim,
                        sum.begin() + (b * seq + (r + 1) * l) * dim);
      }
      SequenceParallelSeams<double> seams(group, batch, seq, dim);
      kernels::Vector<double> buffer;
      const auto vec = [](std::span<const double> s) {
        return std::vector<double>(s.begin(), s.end());
      };
      // One seam call: what it returns and how many messages it sends (one
      // ring allgather or reduce-scatter: t − 1; none: 0).
      const auto expect_seam = [&](const std::string& what, const std::vector<double>& want,
                                   bool sends, const std::string& why, auto call) {
        const Sent before = Sent::now(group);
        std::vector<double> got;
        try {
          got = vec(call());
        } catch (Error& e) {
          e.add_note("in SequenceParallelSeams::" + what.substr(0, what.find(':')));
          throw;
        }
        const Sent sent = Sent::now(group) - before;
        const bool whole_rows = want.size() == static_cast<std::size_t>(n);
        expect_tokens(r, want, got, what + why, whole_rows ? seq : l, whole_rows ? 0 : r * l, seq,
                      t, dim);
        EXPECT_EQ(sent.messages, sends ? t - 1 : 0)
            << "rank " << r << ": " << what
            << (sends ? " sends one ring collective" : " sends nothing") << why;
      };
      // Megatron's f stands before the sublayers and the head (the logits of
      // the rank's vocabulary columns need every token); g after the
      // sublayers and the embedding (the vocabulary slices' partial lookups).
      for (Site site : {Site::kEmbedding, Site::kAttention, Site::kMlp, Site::kHead}) {
        const bool block = site == Site::kAttention || site == Site::kMlp;
        const bool f = block || site == Site::kHead, g = block || site == Site::kEmbedding;
        const std::string at = std::string(" at the ") + model::name_of(site);
        const std::string f_why = !f      ? ": f does not stand there (nothing to gather)"
                                  : block ? ""
                                          : ": f stood there in tp (the logits need every token)";
        const std::string g_why =
            !g      ? ": g does not stand there (nothing to sum)"
            : block ? ""
                    : ": g stood there in tp (each vocabulary slice looked up only its rows)";
        DTW_TRACE("the seams" << at);
        std::vector<double> x = mine, y = f ? random_values(n, 90 + r) : mine;
        expect_seam("enter" + at + (f ? ": the whole sequence (allgather)" : ": unchanged"),
                    f ? whole : mine, f, f_why,
                    [&] { return seams.enter(site, 0, std::span<const double>(x), buffer); });
        expect_seam(
            "enter_backward" + at +
                (f ? ": the sum of the rank's tokens' gradients (reduce-scatter)" : ": unchanged"),
            f ? sum_mine : mine, f, f_why,
            [&] { return seams.enter_backward(site, 0, std::span<double>(y), buffer); });
        y = g ? random_values(n, 90 + r) : mine;
        expect_seam(
            "leave" + at + (g ? ": the sum of the rank's tokens (reduce-scatter)" : ": unchanged"),
            g ? sum_mine : mine, g, g_why,
            [&] { return seams.leave(site, 0, std::span<double>(y), buffer); });
        expect_seam(
            "leave_backward" + at + (g ? ": every token's gradient (allgather)" : ": unchanged"),
            g ? whole : mine, g, g_why,
            [&] { return seams.leave_backward(site, 0, std::span<const double>(x), buffer); });
      }
    });
  }
}

DTW_TEST_STEPS(SequenceArgumentsTest);
TEST(SequenceArgumentsTest, ASequenceThatDoesNotSplitIsNamedWithTheRank) {
  on_ranks(3, [&](Comm& group) {
    std::vector<double> whole(2 * 8 * 4), local(2 * 8 * 4 / 3 + 1);
    testing::expect_error(
        [&] { sequence_allgather<double>(group, whole, local, 2, 8, 4); },
        {"rank " + std::to_string(group.rank()), "sequence of 8 tokens", "t = 3"});
  });
}

// Block 0 of a GPT every t divides: the norms and residuals on the rank's
// tokens, the sublayers on the whole sequence between the seams.
DTW_TEST_STEPS(SequenceParallelBlockTest, "06.6");
TEST(SequenceParallelBlockTest, EqualsTheWholeBlockAndItsNormGradientsSumOverTheGroup) {
  const model::ModelConfig c = testing::divisible_gpt();
  const std::int64_t batch = 2, seq = 12, C = c.dim, N = batch * seq;
  const model::ParamLayout layout = model::param_layout(c);
  const std::vector<double> p = random_values(layout.size(), 61), x = random_values(N * C, 62),
                            dy = random_values(N * C, 63);
  const model::BlockDims full = model::block_dims(c, batch, seq);
  model::BlockCache<double> cache;
  std::vector<double> y(N * C), dx(N * C), g(p.size(), 0.0), scratch(model::block_scratch_size(full));
  model::block_forward(y.data(), cache, x.data(), model::block_weights(layout, 0, p.data()), full);
  model::block_backward(dx.data(), model::block_weights(layout, 0, g.data()), dy.data(), x.data(),
                        cache, model::block_weights(layout, 0, p.data()), full, scratch.data());
  for (int t : {1, 2, 3, 4}) {
    DTW_TRACE("sequence-parallel block, t " << t << ", batch " << batch << ", seq " << seq);
    on_ranks(t, [&](Comm& group) {
      const int r = group.rank();
      const std::int64_t l = seq / t;
      const model::ParamLayout local = model::param_layout(c, testing::test_shard(c, r, t));
      const std::vector<double> lp = testing::cut(layout, local, p);
      std::vector<double> lg(lp.size(), 0.0), lx, ldy, want_y, want_dx;
      for (std::int64_t b = 0; b < batch; ++b) {
        const auto at = [&](const std::vector<double>& v) {
          return std::vector<double>(v.begin() + (b * seq + r * l) * C, v.begin() + (b * seq + (r + 1) * l) * C);
        };
        for (auto [to, from] : {std::pair{&lx, &x}, {&ldy, &dy}, {&want_y, &y}, {&want_dx, &dx}}) {
          const auto part = at(*from);
          to->insert(to->end(), part.begin(), part.end());
        }
      }
      model::BlockDims d = model::block_dims(c, batch, l);
      d.heads = c.heads / t;
      d.mlp_hidden = c.mlp_hidden / t;
      SequenceParallelSeams<double> seams(group, batch, seq, C);
      const model::TokenRuns runs =
          model::ModelShard::sequence(r, t, model::SequenceSplit::kContiguous).positions(seq);
      const model::BlockSeams<double> at{&seams, 0, &runs};
      model::BlockCache<double> lc;
      std::vector<double> ly(lx.size()), ldx(lx.size()), ls(model::block_scratch_size(d));
      model::block_forward(ly.data(), lc, lx.data(), model::block_weights(local, 0, lp.data()), d,
                           nullptr, at);
      model::block_backward(ldx.data(), model::block_weights(local, 0, lg.data()), ldy.data(),
                            lx.data(), lc, model::block_weights(local, 0, lp.data()), d, ls.data(),
                            nullptr, {}, at);
      expect_near(r, want_y, ly, "the block's output on the rank's tokens");
      expect_near(r, want_dx, ldx, "the block's input gradient on the rank's tokens");
      // Replicated tensors (norms, row-parallel biases): partial per rank, summed over the group.
      for (const model::ParamView& v : local.views()) {
        if (!v.is_whole()) continue;
        std::vector<double> mine(lg.begin() + v.offset, lg.begin() + v.offset + v.size);
        group.reference_allreduce(as_buffer(std::span<double>(mine)), ReduceOp::kSum);
        const model::ParamView& w = layout.find(v.name);
        expect_near(r, {g.begin() + w.offset, g.begin() + w.offset + w.size}, mine,
                    "the sum over the group of " + v.name);
      }
    });
  }
}

DTW_TEST_STEPS(ReplicatedGradsTest, "06.6");
TEST(ReplicatedGradsTest, OneAllreduceSumsEveryReplicatedTensorAndNothingElse) {
  const train::RunSpec spec = testing::tiny(1);
  for (int t : {1, 2, 4}) {
    DTW_TRACE("replicated gradients of gpt-tiny, t " << t);
    on_ranks(t, [&](Comm& group) {
      const int r = group.rank();
      const model::ModelShard shard = testing::test_shard(spec.config(), r, t);
      const model::ParamLayout local = model::param_layout(spec.config(), shard);
      train::Replica<double> replica(
          spec, group.exec(),
          train::ReplicaPlan::slice(spec, shard, train::Replication::uncut(local, r, t)));
      std::span<double> grads = replica.grads();
      for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = (r + 1) * 1000.0 + static_cast<double>(i);
      kernels::Vector<double> buffer;
      const Sent before = Sent::now(group);
      reduce_replicated_grads(group, replica, buffer);
      const Sent sent = Sent::now(group) - before;
      // The values first: a tensor left out names itself.
      for (const model::ParamView& v : local.views())
        for (std::int64_t i = 0; i < v.size; i += 7) {
          const double own = (r + 1) * 1000.0 + static_cast<double>(v.offset + i);
          const double sum = t * (t + 1) / 2 * 1000.0 + t * static_cast<double>(v.offset + i);
          // Replicated tensors sit at the same offsets on every rank (they follow
          // only same-sized slices when the vocabulary divides).
          ASSERT_EQ(grads[v.offset + i], v.is_whole() ? sum : own)
              << "rank " << r << ": " << v.name << "[" << i << "]"
              << (v.is_whole() ? " (replicated: summed)" : " (a slice: untouched)");
        }
      const std::int64_t R = replicated_params(spec.config(), true);
      testing::expect_allreduces(group, sent, 1, R, "replicated gradients");
    });
  }
}

}  // namespace
}  // namespace dtw::ch06
