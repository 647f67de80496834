#pragma once
// What the benchmark and the demos share: one attention problem cut into
// sequence shards, single-device attention in double as the oracle, and the
// first row where a rank's result differs from it. Solution only (gen-labs
// copies no *_bench.h), and built on the contract alone.
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dtw/errors.h"
#include "sequence_parallelism.h"

namespace dtw::ch07::bench {

/// B sequences of T tokens, H heads of D features, random q, k, v, dout.
struct Problem {
  std::int64_t batch = 1, heads = 4, seq = 16, head_dim = 8;
  bool causal = true;
  std::vector<double> q, k, v, dout;  ///< [B, H, T, D]
  std::vector<double> out, dq, dk, dv;  ///< the oracle's answers

  Problem(std::int64_t b, std::int64_t h, std::int64_t t, std::int64_t d, bool c = true)
      : batch(b), heads(h), seq(t), head_dim(d), causal(c) {
    const std::int64_t n = b * h * t * d;
    q = random(n, 1, 1.5);
    k = random(n, 2, 1.5);
    v = random(n, 3, 1.0);
    dout = random(n, 4, 1.0);
  }
  static std::vector<double> random(std::int64_t n, unsigned seed, double scale) {
    std::mt19937_64 gen(seed);
    std::normal_distribution<double> dist(0.0, scale);
    std::vector<double> x(static_cast<std::size_t>(n));
    for (double& e : x) e = dist(gen);
    return x;
  }
  kernels::AttentionShape whole_shape() const { return {batch, heads, seq, seq, head_dim}; }
  /// Plain single-device attention, forward and backward, in double.
  void solve() {
    const auto s = whole_shape();
    std::vector<double> probs(static_cast<std::size_t>(batch * heads * seq * seq));
    out.resize(q.size());
    dq.resize(q.size());
    dk.resize(q.size());
    dv.resize(q.size());
    kernels::attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), s, causal);
    kernels::attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), probs.data(),
                                q.data(), k.data(), v.data(), s);
  }
  /// The rows of x at the positions `pos`, in local order, as T.
  template <class T>
  std::vector<T> cut(const std::vector<double>& x, const TokenRuns& pos) const {
    std::vector<T> o;
    for (std::int64_t bh = 0; bh < batch * heads; ++bh)
      for (const auto& r : pos.runs)
        for (std::int64_t i = r.begin; i < r.end; ++i)
          for (std::int64_t e = 0; e < head_dim; ++e)
            o.push_back(static_cast<T>(x[static_cast<std::size_t>((bh * seq + i) * head_dim + e)]));
    return o;
  }
  /// The largest |got − expected| / max(1, |expected|) over the rank's rows,
  /// and where it is (first row above `tol`, or the worst when none is).
  template <class T>
  double worst(const std::vector<double>& expected, const std::vector<T>& got,
               const TokenRuns& pos, double tol, std::string* where) const {
    const std::vector<double> want = cut<double>(expected, pos);
    double most = 0;
    const std::int64_t per_bh = pos.size() * head_dim;
    for (std::size_t i = 0; i < want.size(); ++i) {
      const double e = std::abs(static_cast<double>(got[i]) - want[i]) / std::max(1.0, std::abs(want[i]));
      if (e > most && where) {
        const std::int64_t bh = static_cast<std::int64_t>(i) / per_bh;
        const std::int64_t t = (static_cast<std::int64_t>(i) % per_bh) / head_dim;
        std::ostringstream o;
        o << "sequence " << bh / heads << ", head " << bh % heads << ", position "
          << pos.position(t) << ": expected " << want[i] << ", got " << +got[i];
        *where = o.str();
      }
      most = std::max(most, e);
      if (most > tol) break;
    }
    return most;
  }
};

/// One rank's share of a Problem: its positions, shape and rows (double).
struct Mine {
  TokenRuns pos;
  kernels::AttentionShape shape;
  std::vector<double> q, k, v, dout;
  Mine(const Problem& pr, int r, int p, SequenceSplit split)
      : pos(sequence_runs(r, p, split, pr.seq)),
        shape{pr.batch, pr.heads, pos.size(), pos.size(), pr.head_dim},
        q(pr.cut<double>(pr.q, pos)), k(pr.cut<double>(pr.k, pos)), v(pr.cut<double>(pr.v, pos)),
        dout(pr.cut<double>(pr.dout, pos)) {}
};

/// Throws, naming the tensor and row, when `got` is not the oracle's.
inline void expect_oracle(const Problem& pr, const Mine& m, const char* tensor,
                          const std::vector<double>& want, const std::vector<double>& got,
                          int rank, const std::string& why) {
  std::string where;
  if (pr.worst(want, got, m.pos, 1e-9, &where) > 1e-9)
    throw InvalidArgument("rank " + std::to_string(rank) + ": " + tensor +
                          " differs from full attention at " + where + ": " + why);
}

}  // namespace dtw::ch07::bench
