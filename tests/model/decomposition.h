#pragma once
// Plain-code stand-ins for the collectives of chapters 06 and 07, so the
// decomposition tests run t tensor slices or s sequence shards of the GPT on
// one process with no messages: each shard is a thread, and a LocalGroup
// combines their values through shared memory in a fixed order (a sum of
// partial outputs, a maximum, a concatenation). These tests are the
// specification the chapters' collectives must meet.
#include <algorithm>
#include <barrier>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "dtw/model/attention_core.h"
#include "dtw/model/params.h"
#include "dtw/model/seams.h"

namespace dtw::testing {

// p threads that meet at barriers and read each other's posted buffers.
class LocalGroup {
 public:
  explicit LocalGroup(int p) : p_(p), barrier_(p), posted_(static_cast<std::size_t>(p)) {}
  int size() const { return p_; }

  // Every member's x becomes the elementwise sum (or maximum) over members,
  // combined in member order.
  template <class T>
  void allreduce(int r, std::span<T> x, bool max = false) {
    posted_[static_cast<std::size_t>(r)] = x.data();
    barrier_.arrive_and_wait();
    std::vector<T> out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      T acc = static_cast<const T*>(posted_[0])[i];
      for (int q = 1; q < p_; ++q) {
        const T v = static_cast<const T*>(posted_[static_cast<std::size_t>(q)])[i];
        acc = max ? std::max(acc, v) : acc + v;
      }
      out[i] = acc;
    }
    barrier_.arrive_and_wait();  // every member has read every x
    std::copy(out.begin(), out.end(), x.begin());
  }

  // Every member's pointer, after all have posted; call done() when finished
  // reading what they point to.
  std::vector<const void*> gather(int r, const void* mine) {
    posted_[static_cast<std::size_t>(r)] = mine;
    barrier_.arrive_and_wait();
    return posted_;
  }
  void done() { barrier_.arrive_and_wait(); }

 private:
  int p_;
  std::barrier<> barrier_;
  std::vector<const void*> posted_;
};

// Runs fn(r) on p threads and rethrows the first exception.
inline void run_shards(int p, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  std::exception_ptr error;
  std::mutex m;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!error) error = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

// The local parameters of a shard's layout, cut from the whole model's buffer
// through each view's slice.
inline std::vector<double> cut_params(const model::ParamLayout& whole,
                                      const model::ParamLayout& local,
                                      const std::vector<double>& values) {
  std::vector<double> out(static_cast<std::size_t>(local.size()));
  for (const model::ParamView& v : local.views()) {
    const model::ParamView& w = whole.find(v.name);
    for (std::int64_t i = 0; i < v.size; ++i)
      out[static_cast<std::size_t>(v.offset + i)] =
          values[static_cast<std::size_t>(w.offset + v.slice.whole_index(i))];
  }
  return out;
}

// Megatron's tensor-parallel seams in plain code: g (leave) sums the slices'
// partial outputs, f's backward (enter_backward) sums their partial input
// gradients, and the vocabulary-parallel loss takes the maximum and the sums
// over slices. Only the sites the shard cuts are partial (`cut`): a site whose
// sublayer every slice computes whole must not be summed.
// Which sites a shard cuts: the embedding and head (vocabulary), the
// attention (heads) and the MLP (hidden units).
struct Cut {
  bool vocab = true, heads = true, hidden = true;
};

class TensorParallelSeams final : public model::Seams<double> {
 public:
  TensorParallelSeams(LocalGroup& group, int rank, Cut cut = {})
      : group_(group), rank_(rank), cut_(cut) {}
  std::span<const double> leave(model::Site site, int, std::span<double> y,
                                dtw::kernels::Vector<double>&) override {
    if (is_cut(site)) group_.allreduce(rank_, y);
    return y;
  }
  std::span<const double> enter_backward(model::Site site, int, std::span<double> dx,
                                         dtw::kernels::Vector<double>&) override {
    if (is_cut(site)) group_.allreduce(rank_, dx);
    return dx;
  }
  void vocab_max(std::span<double> m) override { group_.allreduce(rank_, m, true); }
  void vocab_sum(std::span<double> s) override { group_.allreduce(rank_, s); }

 private:
  bool is_cut(model::Site site) const {
    switch (site) {
      case model::Site::kEmbedding:
      case model::Site::kHead: return cut_.vocab;
      case model::Site::kAttention: return cut_.heads;
      case model::Site::kMlp: return cut_.hidden;
    }
    return true;
  }
  LocalGroup& group_;
  int rank_;
  Cut cut_;
};

// Sequence-parallel attention in plain code: each shard attends its queries
// to every shard's keys and values (read from shared memory, one block per
// shard, merged with the log-sum-exp), and in the backward sums every shard's
// contribution to its own dK and dV -- what ring attention does with p−1 hops.
class SequenceSeams final : public model::Seams<double> {
 public:
  SequenceSeams(LocalGroup& group, int rank) : core_(group, rank) {}
  model::AttentionCore<double>& attention() override { return core_; }

 private:
  class Core final : public model::AttentionCore<double> {
   public:
    Core(LocalGroup& group, int rank) : group_(group), rank_(rank) {}
    void forward(double* out, model::CoreCache<double>& cache, const double* q, const double* k,
                 const double* v, const kernels::AttentionShape& shape,
                 const model::TokenRuns& positions, int) override {
      const Posted mine{k, v, nullptr, &positions};
      const auto all = group_.gather(rank_, &mine);
      const std::int64_t rows = shape.batch * shape.heads * shape.q_len;
      std::fill_n(out, rows * shape.head_dim, 0.0);
      cache.lse.assign(static_cast<std::size_t>(rows), -std::numeric_limits<double>::infinity());
      for (const void* p : all) {
        const Posted& o = *static_cast<const Posted*>(p);
        model::attend_runs_forward(out, cache.lse.data(), q, positions, o.k, o.v, *o.positions,
                                   shape);
      }
      group_.done();
    }
    void backward(double* dq, double* dk, double* dv, const double* dout, const double* out,
                  const model::CoreCache<double>& cache, const double* q, const double* k,
                  const double* v, const kernels::AttentionShape& shape,
                  const model::TokenRuns& positions, int) override {
      const std::int64_t n = shape.batch * shape.heads * shape.q_len * shape.head_dim;
      const int p = group_.size();
      // contribution[o] = [dK; dV] of shard o's block from this shard's queries.
      std::vector<std::vector<double>> contribution(static_cast<std::size_t>(p));
      const Posted mine{k, v, &contribution, &positions};
      const auto all = group_.gather(rank_, &mine);
      std::fill_n(dq, n, 0.0);
      for (int o = 0; o < p; ++o) {
        const Posted& other = *static_cast<const Posted*>(all[static_cast<std::size_t>(o)]);
        auto& c = contribution[static_cast<std::size_t>(o)];
        c.assign(static_cast<std::size_t>(2 * n), 0.0);
        model::attend_runs_backward(dq, c.data(), c.data() + n, dout, out, cache.lse.data(), q,
                                    positions, other.k, other.v, *other.positions, shape);
      }
      group_.done();  // every contribution computed
      std::fill_n(dk, n, 0.0);
      std::fill_n(dv, n, 0.0);
      for (const void* ptr : all) {
        const auto& c = (*static_cast<const Posted*>(ptr)->contribution)[static_cast<std::size_t>(rank_)];
        for (std::int64_t i = 0; i < n; ++i) {
          dk[i] += c[static_cast<std::size_t>(i)];
          dv[i] += c[static_cast<std::size_t>(n + i)];
        }
      }
      group_.done();  // every contribution read
    }
    std::int64_t cache_elements(const kernels::AttentionShape& s) const override {
      return s.batch * s.heads * s.q_len;
    }

   private:
    struct Posted {
      const double* k;
      const double* v;
      std::vector<std::vector<double>>* contribution;
      const model::TokenRuns* positions;
    };
    LocalGroup& group_;
    int rank_;
  };
  Core core_;
};

// Megatron-SP in plain code, for one block on t ranks that each hold a
// contiguous token range of every sequence (batch sequences of seq tokens)
// and a slice of the heads and hidden units: enter all-gathers the norm's
// output along the sequence, leave reduce-scatters the partial outputs back
// to the ranges; their backwards swap the two. The embedding and the head
// keep the rank's tokens (identity), as chapter 06's first version did.
// `again`: the block drops the gathered input after the forward and enters
// again in the backward, as Megatron does (SublayerInput::enter_again); else
// it keeps it. `ends`: Megatron's vocabulary-parallel ends -- the forward
// is given whole sequences (ModelShard::cut_by_seams), the embedding's leave
// reduce-scatters the vocabulary slices' lookups to the rank's tokens and
// the head's enter gathers them back; the loss's statistics are summed over
// the group.
class SequenceParallelSeams final : public model::Seams<double> {
 public:
  SequenceParallelSeams(LocalGroup& group, int rank, std::int64_t batch, std::int64_t seq,
                        std::int64_t dim, bool again = false, bool ends = false)
      : group_(group), rank_(rank), batch_(batch), seq_(seq), dim_(dim), again_(again),
        ends_(ends) {}
  std::span<const double> enter(model::Site site, int, std::span<const double> x,
                                dtw::kernels::Vector<double>& buffer) override {
    if (gathers_in(site)) ++enters_;
    return gathers_in(site) ? gather(x, buffer) : x;
  }
  /// The enter calls that gathered, so far.
  int enters() const { return enters_; }
  std::span<const double> leave(model::Site site, int, std::span<double> y,
                                dtw::kernels::Vector<double>& buffer) override {
    return scatters_out(site) ? scatter(y, buffer) : y;
  }
  std::span<const double> leave_backward(model::Site site, int, std::span<const double> dy,
                                         dtw::kernels::Vector<double>& buffer) override {
    return scatters_out(site) ? gather(dy, buffer) : dy;
  }
  std::span<const double> enter_backward(model::Site site, int, std::span<double> dx,
                                         dtw::kernels::Vector<double>& buffer) override {
    return gathers_in(site) ? scatter(dx, buffer) : dx;
  }
  // A sublayer (and with the ends, the head) sees the whole sequence,
  // gathered into enter's buffer.
  model::SublayerInput sublayer_input(model::Site site, std::int64_t seq) const override {
    if (!gathers_in(site)) return {seq, false};
    return {seq * group_.size(), true, again_};
  }
  void vocab_max(std::span<double> m) override {
    if (ends_) group_.allreduce(rank_, m, true);
  }
  void vocab_sum(std::span<double> s) override {
    if (ends_) group_.allreduce(rank_, s);
  }

 private:
  static bool in_block(model::Site site) {
    return site == model::Site::kAttention || site == model::Site::kMlp;
  }
  bool gathers_in(model::Site site) const {
    return in_block(site) || (ends_ && site == model::Site::kHead);
  }
  bool scatters_out(model::Site site) const {
    return in_block(site) || (ends_ && site == model::Site::kEmbedding);
  }
  std::int64_t local() const { return seq_ / group_.size(); }
  // Row (b, q·local + i) of the whole comes from rank q's row (b, i).
  std::span<const double> gather(std::span<const double> x, dtw::kernels::Vector<double>& out) {
    const auto all = group_.gather(rank_, x.data());
    const std::int64_t l = local();
    out.resize(static_cast<std::size_t>(batch_ * seq_ * dim_));
    for (int q = 0; q < group_.size(); ++q)
      for (std::int64_t b = 0; b < batch_; ++b)
        std::copy_n(static_cast<const double*>(all[static_cast<std::size_t>(q)]) + b * l * dim_,
                    l * dim_, out.data() + (b * seq_ + q * l) * dim_);
    group_.done();
    return out;
  }
  std::span<const double> scatter(std::span<double> y, dtw::kernels::Vector<double>& out) {
    group_.allreduce(rank_, y);
    const std::int64_t l = local();
    out.resize(static_cast<std::size_t>(batch_ * l * dim_));
    for (std::int64_t b = 0; b < batch_; ++b)
      std::copy_n(y.data() + (b * seq_ + rank_ * l) * dim_, l * dim_, out.data() + b * l * dim_);
    return out;
  }
  LocalGroup& group_;
  int rank_;
  std::int64_t batch_, seq_, dim_;
  bool again_, ends_;
  int enters_ = 0;
};

}  // namespace dtw::testing
