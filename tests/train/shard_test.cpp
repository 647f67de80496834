// The training layer carries shards: replicas of tensor slices and of
// sequence shards train through the harness, with the seams done by the
// backend's reference collectives (standing in for chapters 06 and 07), and
// what they report matches the single-device reference in double. The
// clipping norm counts a replicated tensor once, and a replicated tensor that
// drifted apart is named by tensor, element and ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dtw/model/attention_core.h"
#include "dtw/train/reference.h"
#include "dtw/train/replicated.h"
#include "dtw/train/sequence_batch.h"
#include "dtw/train/strategy.h"

namespace dtw::train {
namespace {

RunSpec tiny(std::int64_t steps, double clip) {
  RunSpec spec = standard_run("gpt-tiny");
  spec.steps = steps;
  spec.batch = 3;
  spec.warmup_steps = 1;
  spec.clip_norm = clip;
  spec.dtype = DType::kFloat64;
  return spec;
}

HarnessOptions on(int ranks) {
  HarnessOptions o;
  o.ranks = ranks;
  o.timeout = std::chrono::seconds(60);
  return o;
}

template <class T>
void allreduce(Comm& comm, std::span<T> x, ReduceOp op = ReduceOp::kSum) {
  comm.reference_allreduce(as_buffer(x), op);
}

// Megatron's f and g and the vocabulary-parallel loss on the backend's
// reference allreduce.
class TensorParallel final : public model::Seams<double> {
 public:
  explicit TensorParallel(Comm& comm) : comm_(comm) {}
  std::span<const double> leave(model::Site, int, std::span<double> y,
                                dtw::kernels::Vector<double>&) override {
    allreduce(comm_, y);
    return y;
  }
  std::span<const double> enter_backward(model::Site, int, std::span<double> dx,
                                         dtw::kernels::Vector<double>&) override {
    allreduce(comm_, dx);
    return dx;
  }
  void vocab_max(std::span<double> m) override { allreduce(comm_, m, ReduceOp::kMax); }
  void vocab_sum(std::span<double> s) override { allreduce(comm_, s); }

 private:
  Comm& comm_;
};

// Every shard's keys and values gathered, attended block by block and merged;
// the keys' and values' gradients summed back to their owner.
class GatheredSequence final : public model::Seams<double>,
                               public model::AttentionCore<double> {
 public:
  GatheredSequence(Comm& comm, const model::ModelShard& shard, std::int64_t seq)
      : comm_(comm) {
    for (int r = 0; r < comm.size(); ++r)
      positions_.push_back(model::ModelShard::sequence(r, comm.size(), shard.split).positions(seq));
  }
  model::AttentionCore<double>& attention() override { return *this; }
  void forward(double* out, model::CoreCache<double>& cache, const double* q, const double* k,
               const double* v, const kernels::AttentionShape& shape,
               const model::TokenRuns& positions, int) override {
    const std::int64_t n = shape.batch * shape.heads * shape.q_len * shape.head_dim;
    const std::vector<double> kv = gather(k, v, n);
    const std::int64_t rows = shape.batch * shape.heads * shape.q_len;
    std::fill_n(out, n, 0.0);
    cache.lse.assign(static_cast<std::size_t>(rows), -std::numeric_limits<double>::infinity());
    for (int o = 0; o < comm_.size(); ++o)
      model::attend_runs_forward(out, cache.lse.data(), q, positions, kv.data() + 2 * o * n,
                                 kv.data() + (2 * o + 1) * n, positions_[o], shape);
  }
  void backward(double* dq, double* dk, double* dv, const double* dout, const double* out,
                const model::CoreCache<double>& cache, const double* q, const double* k,
                const double* v, const kernels::AttentionShape& shape,
                const model::TokenRuns& positions, int) override {
    const std::int64_t n = shape.batch * shape.heads * shape.q_len * shape.head_dim;
    const int p = comm_.size();
    const std::vector<double> kv = gather(k, v, n);
    std::vector<double> contribution(static_cast<std::size_t>(2 * n * p), 0.0), mine(2 * n);
    std::fill_n(dq, n, 0.0);
    for (int o = 0; o < p; ++o)
      model::attend_runs_backward(dq, contribution.data() + 2 * o * n,
                                  contribution.data() + (2 * o + 1) * n, dout, out,
                                  cache.lse.data(), q, positions, kv.data() + 2 * o * n,
                                  kv.data() + (2 * o + 1) * n, positions_[o], shape);
    comm_.reference_reduce_scatter(as_buffer(std::span<const double>(contribution)),
                                   as_buffer(std::span<double>(mine)), ReduceOp::kSum);
    std::copy_n(mine.data(), n, dk);
    std::copy_n(mine.data() + n, n, dv);
  }
  std::int64_t cache_elements(const kernels::AttentionShape& s) const override {
    return s.batch * s.heads * s.q_len;
  }

 private:
  std::vector<double> gather(const double* k, const double* v, std::int64_t n) {
    std::vector<double> mine(k, k + n), all(static_cast<std::size_t>(2 * n * comm_.size()));
    mine.insert(mine.end(), v, v + n);
    comm_.reference_allgather(as_buffer(std::span<const double>(mine)),
                              as_buffer(std::span<double>(all)));
    return all;
  }
  Comm& comm_;
  std::vector<model::TokenRuns> positions_;
};

// One tensor-parallel rank: its slice, the uncut tensors replicated over the
// world, clipping over the world; the replicated copies checked every step.
void tensor_parallel(RankRun<double>& run) {
  Comm& comm = run.comm();
  const RunSpec& spec = run.spec();
  const model::ModelShard shard =
      model::ModelShard::tensor_slice(spec.config(), comm.rank(), comm.size());
  const model::ParamLayout local = model::param_layout(spec.config(), shard);
  Replica<double> replica(
      spec, run.exec(),
      ReplicaPlan::slice(spec, shard, Replication::uncut(local, comm.rank(), comm.size())));
  TensorParallel seams(comm);
  replica.set_seams(&seams);
  for (std::int64_t step = 0; step < spec.steps; ++step) {
    const double loss = replica.forward_backward(step, 0, 1);
    double sum = replica.local_sum_of_squares();
    allreduce(comm, std::span<double>(&sum, 1));
    replica.clip(sum);
    replica.step(step);
    check_replicated(replica, comm, "after step " + std::to_string(step + 1));
    run.record_loss(step, loss);
  }
  // The in-rank comparison places the slices too.
  const ReferenceCheck c = compare_to_reference<double>(comm.rank(), replica, run.losses());
  EXPECT_TRUE(c.ok) << c.message;
  EXPECT_EQ(c.compared, static_cast<std::int64_t>(replica.params().size()));
  run.report(replica);
}

TEST(ShardTest, TensorSlicesTrainAndMatchTheReference) {
  // A clip of 0.05 binds every step: a norm counted wrongly would show.
  const RunSpec spec = tiny(3, 0.05);
  for (int t : {1, 2, 4}) {
    const RunOutcome out = run_ranks<double>(spec, on(t), tensor_parallel);
    EXPECT_TRUE(out.matches) << "t=" << t << ": " << out.mismatch;
    EXPECT_LT(out.max_abs_param_diff, 1e-9) << "t=" << t;
    EXPECT_EQ(out.losses.size(), 3u);
    // Every slice of every tensor reported: the whole model, plus the
    // replicated tensors once more on each further rank.
    EXPECT_GE(out.compared, reference_run<double>(spec)->layout.size()) << "t=" << t;
  }
}

TEST(ShardTest, ClippingCountsAReplicatedTensorOnce) {
  const RunSpec spec = tiny(1, 0);
  Replica<double> whole(spec, Exec::host(), ReplicaPlan::whole(spec));
  whole.forward_backward(0, 0, 1);
  const double want = whole.local_sum_of_squares();
  for (int t : {2, 4}) {
    HarnessOptions o = on(t);
    o.compare = false;
    // Asserted inside the rank function, so the MPI twin checks every process.
    run_ranks<double>(spec, o, [&](RankRun<double>& run) {
      Comm& comm = run.comm();
      const auto shard = model::ModelShard::tensor_slice(spec.config(), comm.rank(), t);
      const auto local = model::param_layout(spec.config(), shard);
      Replica<double> replica(spec, run.exec(),
                              ReplicaPlan::slice(spec, shard, Replication::uncut(local, comm.rank(), t)));
      TensorParallel seams(comm);
      replica.set_seams(&seams);
      replica.forward_backward(0, 0, 1);
      double sum = replica.local_sum_of_squares();
      allreduce(comm, std::span<double>(&sum, 1));
      EXPECT_NEAR(sum, want, 1e-12 * want) << "t=" << t << " rank " << comm.rank();
      // The field's bug: every rank counts the replicated tensors.
      double all = 0;
      for (double g : replica.grads()) all += g * g;
      allreduce(comm, std::span<double>(&all, 1));
      EXPECT_GT(all, want * (1 + 1e-9)) << "t=" << t << ": the naive sum counts copies";
    });
  }
}

TEST(ShardTest, ADriftedReplicatedTensorIsNamedByTensorElementAndRanks) {
  const RunSpec spec = tiny(1, 0);
  HarnessOptions o = on(3);
  o.compare = false;
  run_ranks<double>(spec, o, [&](RankRun<double>& run) {
    Comm& comm = run.comm();
    const auto shard = model::ModelShard::whole();
    const auto local = model::param_layout(spec.config(), shard);
    Replica<double> replica(spec, run.exec(),
                            ReplicaPlan::slice(spec, shard, Replication::uncut(local, comm.rank(), 3)));
    EXPECT_GT(check_replicated(replica, comm, "at the start"), 0);
    if (comm.rank() == 2) replica.tensor("h.1.ln2.gamma").params[5] += 1e-12;
    // Every rank raises the same error (none is left waiting).
    std::string m;
    try {
      check_replicated(replica, comm, "after step 1");
    } catch (const InvalidArgument& e) {
      m = e.what();
    }
    EXPECT_NE(m.find("h.1.ln2.gamma"), std::string::npos) << "rank " << comm.rank() << ": " << m;
    EXPECT_NE(m.find("element 5"), std::string::npos) << m;
    EXPECT_NE(m.find("group rank 2 (world rank 2)"), std::string::npos) << m;
    EXPECT_NE(m.find("after step 1"), std::string::npos) << m;
  });
}

TEST(ShardTest, TheTensorAccessorGivesTheSliceAndItsPlaceInTheWhole) {
  const RunSpec spec = tiny(1, 0);
  const auto shard = model::ModelShard::tensor_slice(spec.config(), 1, 2);
  Replica<double> replica(spec, Exec::host(), ReplicaPlan::slice(spec, shard));
  Replica<double> whole(spec, Exec::host(), ReplicaPlan::whole(spec));
  for (const char* name : {"h.0.attn.qkv.weight", "h.1.mlp.proj.weight", "wte", "lnf.beta"}) {
    const auto t = replica.tensor(name);
    const auto w = whole.tensor(name);
    ASSERT_EQ(t.params.size(), static_cast<std::size_t>(t.view->size)) << name;
    for (std::int64_t i = 0; i < t.view->size; ++i)
      ASSERT_EQ(t.params[i], w.params[t.whole_index(i)]) << name << " " << i;
  }
  // A column block of [64, 256]: half the columns of every row.
  const auto proj = replica.tensor("h.1.mlp.proj.weight");
  EXPECT_EQ(proj.view->shape, (std::vector<std::int64_t>{64, 128}));
  EXPECT_EQ(proj.whole_index(128), 256 + 128);
  EXPECT_THROW(replica.tensor("h.9.mlp.fc.weight"), InvalidArgument);
}

TEST(ShardTest, ASequenceShardOfABatchKeepsItsTokensAndWeighsItsShare) {
  const RunSpec spec = tiny(1, 0);
  const Batch rows = make_batch(spec, 0, 1, 3);  // one row of three
  const auto shard = model::ModelShard::sequence(1, 4, model::SequenceSplit::kZigZag);
  const Batch mine = sequence_shard_of(rows, shard);
  const std::int64_t T = rows.seq_len, n = T / 8;  // 8 chunks of 4 tokens
  ASSERT_EQ(mine.seq_len, 2 * n);
  for (std::int64_t t = 0; t < n; ++t) {
    EXPECT_EQ(mine.tokens[t], rows.tokens[n + t]);           // chunk 1
    EXPECT_EQ(mine.targets[n + t], rows.targets[6 * n + t]);  // chunk 2·4 − 1 − 1
  }
  EXPECT_DOUBLE_EQ(mine.weight, rows.weight / 4);
  // An MLP batch has no sequence; a sequence that does not cut is refused.
  EXPECT_THROW(sequence_shard_of(make_batch(standard_run("mlp-tiny"), 0), shard), InvalidArgument);
  EXPECT_THROW(sequence_shard_of(rows, model::ModelShard::sequence(0, 3, model::SequenceSplit::kContiguous)),
               InvalidArgument);
  EXPECT_THROW(Network<double>::make(standard_run("mlp-tiny").config(), shard), InvalidArgument);
}

// One sequence-parallel rank: every parameter, its token range of every row;
// gradients summed over the ranks as data parallelism sums them.
void sequence_parallel(RankRun<double>& run, model::SequenceSplit split) {
  Comm& comm = run.comm();
  const RunSpec& spec = run.spec();
  const auto shard = model::ModelShard::sequence(comm.rank(), comm.size(), split);
  Replica<double> replica(spec, run.exec(), ReplicaPlan::slice(spec, shard));
  GatheredSequence seams(comm, shard, spec.sequence());
  replica.set_seams(&seams);
  for (std::int64_t step = 0; step < spec.steps; ++step) {
    const double weight = sequence_shard_of(make_batch(spec, step), shard).weight;
    double loss = weight * replica.forward_backward(step, 0, 1, weight);
    allreduce(comm, std::span<double>(&loss, 1));
    allreduce(comm, replica.grads());
    replica.clip(replica.local_sum_of_squares());
    replica.step(step);
    run.record_loss(step, loss);
  }
  run.report(replica);
}

TEST(ShardTest, SequenceShardsTrainAndMatchTheReference) {
  const RunSpec spec = tiny(2, 0.05);
  for (auto split : {model::SequenceSplit::kContiguous, model::SequenceSplit::kZigZag}) {
    for (int s : {1, 2, 4}) {
      const RunOutcome out = run_ranks<double>(
          spec, on(s), [split](RankRun<double>& run) { sequence_parallel(run, split); });
      EXPECT_TRUE(out.matches) << "s=" << s << ": " << out.mismatch;
      EXPECT_LT(out.max_abs_param_diff, 1e-9) << "s=" << s;
    }
  }
}

}  // namespace
}  // namespace dtw::train
