#pragma once
// Compute phases cut at every collective, for the timeline and the modeled
// fabric. Tensor parallelism's collectives block in the middle of the
// forward and the backward: the sublayer after one needs its result. Marked
// as one compute phase around the whole pass, they would look hidden behind
// compute that in truth waits for them (the replay waits for a call made
// inside a compute phase only at the phase's end). This decorator ends the
// current compute phase at each seam that communicates, runs the seam, and
// starts the next phase with the work of the stretch that follows: each
// sublayer's matrix products by their formula, scaled so that the pass adds
// up to the model's own count. Machinery, not the lesson.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensor_parallel.h"

namespace dtw::ch06 {

/// Wraps `inner` (MegatronSeams or SequenceParallelSeams) for one rank's passes.
template <TrainElement T>
class PhasedSeams final : public model::Seams<T> {
 public:
  /// `sp`: the sequence-parallel seams (which sites communicate); `pass`:
  /// the model's work of one forward and backward (Replica::pass_cost).
  PhasedSeams(model::Seams<T>& inner, train::RankRun<T>& run, const model::ModelConfig& c,
              const model::ModelShard& shard, std::int64_t batch, std::int64_t seq, bool sp,
              const train::Cost& pass)
      : inner_(inner),
        run_(run),
        sp_(sp),
        work_(stretches(c, shard, batch, seq, sp, pass)),
        rank_(run.comm().rank()),
        t_(run.comm().size()),
        whole_(static_cast<std::size_t>(batch * seq * c.dim)) {}

  /// Opens the pass's first compute phase; call before forward_backward.
  void begin_pass() {
    next_ = 0;
    open();
  }
  /// Closes the last one; every stretch must have been used.
  void end_pass() {
    phase_.reset();
    DTW_CHECK_ARG(next_ == work_.size(), "PhasedSeams: the pass made "
                                             << next_ - 1 << " communicating seam calls, expected "
                                             << work_.size() - 1);
  }

  // Each seam's result is checked against the size the model goes on with,
  // before the model uses it, so a seam that gathers or scatters at the
  // wrong site, or by the wrong amount, is reported (rank, site, sizes)
  // instead of running off a buffer.
  std::span<const T> enter(model::Site s, int l, std::span<const T> x,
                           kernels::Vector<T>& b) override {
    const bool gathers = sp_ && where_f(s);
    return checked("enter", s, l, gathers ? whole_ : x.size(), x.size(), cut(gathers, [&] {
                     return located("enter", s, l, [&] { return inner_.enter(s, l, x, b); });
                   }));
  }
  std::span<const T> leave(model::Site s, int l, std::span<T> y, kernels::Vector<T>& b) override {
    const bool scatters = sp_ && where_g(s);
    return checked("leave", s, l, scatters ? whole_ / t_ : y.size(), y.size(),
                   cut(!sp_ || scatters, [&] {
                     return located("leave", s, l, [&] { return inner_.leave(s, l, y, b); });
                   }));
  }
  std::span<const T> leave_backward(model::Site s, int l, std::span<const T> dy,
                                    kernels::Vector<T>& b) override {
    const bool gathers = sp_ && where_g(s);
    return checked("leave_backward", s, l, gathers ? whole_ : dy.size(), dy.size(),
                   cut(gathers, [&] {
                     return located("leave_backward", s, l,
                                    [&] { return inner_.leave_backward(s, l, dy, b); });
                   }));
  }
  std::span<const T> enter_backward(model::Site s, int l, std::span<T> dx,
                                    kernels::Vector<T>& b) override {
    const bool scatters = sp_ && where_f(s);
    return checked("enter_backward", s, l, scatters ? whole_ / t_ : dx.size(), dx.size(),
                   cut(!sp_ || scatters, [&] {
                     return located("enter_backward", s, l,
                                    [&] { return inner_.enter_backward(s, l, dx, b); });
                   }));
  }
  model::SublayerInput sublayer_input(model::Site s, std::int64_t seq) const override {
    return inner_.sublayer_input(s, seq);
  }
  model::AttentionCore<T>& attention() override { return inner_.attention(); }
  void vocab_max(std::span<T> m) override {
    cut(true, [&] { inner_.vocab_max(m); return 0; });
  }
  void vocab_sum(std::span<T> s) override {
    cut(true, [&] { inner_.vocab_sum(s); return 0; });
  }

 private:
  // A phase object built in place (Tracer::Phase cannot move).
  struct Held {
    Tracer::Phase phase;
    template <class F>
    explicit Held(F f) : phase(f()) {}
  };
  // Runs a seam; an error inside it (a sequence collective given the wrong
  // sizes) is told where the model called it.
  template <class F>
  std::span<const T> located(const char* seam, model::Site s, int l, F call) {
    try {
      return call();
    } catch (Error& e) {
      e.add_note(std::string("in the ") + model::name_of(s) + " seam's " + seam +
                 (in_block(s) ? " (layer " + std::to_string(l) + ")" : std::string()));
      throw;
    }
  }
  std::span<const T> checked(const char* seam, model::Site s, int l, std::size_t expected,
                             std::size_t given, std::span<const T> out) const {
    DTW_CHECK_ARG(
        out.size() == expected,
        "rank " << rank_ << ": the " << model::name_of(s) << " seam's " << seam
                << (in_block(s) ? " (layer " + std::to_string(l) + ")" : std::string())
                << " was given " << given << " values and returned " << out.size() << ", expected "
                << expected << " ("
                << (expected != given && expected == whole_ ? "the whole sequence, batch·seq·dim"
                    : expected != given ? "the rank's own tokens, batch·seq/t·dim"
                                        : "as many as it was given")
                << "; t = " << t_ << ")");
    return out;
  }
  static bool in_block(model::Site s) {
    return s == model::Site::kAttention || s == model::Site::kMlp;
  }
  // Where Megatron's f stands (before a cut matrix: SP gathers there) and
  // where g stands (after one: SP reduce-scatters there).
  static bool where_f(model::Site s) { return in_block(s) || s == model::Site::kHead; }
  static bool where_g(model::Site s) { return in_block(s) || s == model::Site::kEmbedding; }
  template <class F>
  auto cut(bool communicates, F call) {
    if (!communicates || !phase_) return call();
    phase_.reset();
    auto out = call();
    open();
    return out;
  }
  void open() {
    const train::Cost w = next_ < work_.size() ? work_[next_] : train::Cost{};
    ++next_;
    phase_.emplace([&] { return run_.phase("compute", {.flops = w.flops, .bytes = w.bytes}); });
  }

  // The work before each communicating seam call, in the pass's order, and
  // after the last one.
  static std::vector<train::Cost> stretches(const model::ModelConfig& c,
                                            const model::ModelShard& shard, std::int64_t batch,
                                            std::int64_t seq, bool sp, const train::Cost& pass) {
    const double N = static_cast<double>(batch * seq), C = static_cast<double>(c.dim);
    const model::IndexRange h = shard.heads.resolved(c.heads), f = shard.hidden.resolved(c.mlp_hidden);
    const model::IndexRange v = shard.vocab.resolved(c.vocab);
    const double D = C / static_cast<double>(c.heads), W = static_cast<double>(h.end - h.begin) * D;
    const double attn = 2 * N * C * 3 * W + 2 * N * W * C +
                        4 * static_cast<double>(batch * (h.end - h.begin) * seq * seq) * D;
    const double mlp = 4 * N * C * static_cast<double>(f.end - f.begin);
    const double head = 2 * N * C * static_cast<double>(v.end - v.begin);
    const bool whole_vocab = v.begin == 0 && v.end == c.vocab;
    std::vector<double> flops;
    if (!sp) {
      flops.push_back(0);  // the embedding, then g
      for (int l = 0; l < c.layers; ++l) flops.insert(flops.end(), {attn, mlp});
      // The logits, the exponentials, the head's backward (a whole vocabulary
      // takes the fused loss, which calls neither vocab seam).
      if (whole_vocab) flops.push_back(3 * head);
      else flops.insert(flops.end(), {head, 0, 2 * head});
      for (int l = 0; l < c.layers; ++l) flops.insert(flops.end(), {2 * mlp, 2 * attn});
      flops.push_back(0);  // the embedding's backward
    } else {
      flops.push_back(0);  // the lookup, then the embedding's reduce-scatter
      for (int l = 0; l < c.layers; ++l) flops.insert(flops.end(), {0, attn, 0, mlp});
      // The head's gather; the logits (and the loss's two reductions); its
      // input gathered again; its backward, then its reduce-scatter.
      if (whole_vocab) flops.insert(flops.end(), {0, head, 2 * head});
      else flops.insert(flops.end(), {0, head, 0, 0, 2 * head});
      // Backward, each sublayer: leave_backward's gather, enter's second
      // gather of the input (nothing between them), the sublayer, and
      // enter_backward's reduce-scatter.
      for (int l = c.layers - 1; l >= 0; --l)
        flops.insert(flops.end(), {0, 0, 2 * mlp, 0, 0, 2 * attn});
      flops.insert(flops.end(), {0, 0});  // the embedding's gather, its backward
    }
    double total = 0;
    for (double x : flops) total += x;
    std::vector<train::Cost> out;
    for (double x : flops)
      out.push_back({total > 0 ? pass.flops * x / total : 0,
                     pass.bytes / static_cast<double>(flops.size())});
    return out;
  }

  model::Seams<T>& inner_;
  train::RankRun<T>& run_;
  bool sp_;
  std::vector<train::Cost> work_;
  std::size_t next_ = 0;
  std::optional<Held> phase_;
  int rank_, t_;
  std::size_t whole_;  // batch·seq·dim: the whole sequence's activations
};

}  // namespace dtw::ch06
