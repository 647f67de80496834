#pragma once
// Shared pieces of the model tests: a GPT small enough for finite differences
// over every parameter, and random parameters that exercise every term.
#include <cstdint>
#include <vector>

#include "dtw/model/config.h"
#include "dtw/model/params.h"
#include "dtw/model/random.h"
#include "gradcheck.h"

namespace dtw::testing {

// dim 8 (2 heads of 4), 2 layers, context 5, vocab 11, mlp_hidden 12: about
// 1,400 parameters, so a central difference on each costs milliseconds.
inline model::ModelConfig gradcheck_gpt(bool tied = true) {
  model::ModelConfig c;
  c.name = tied ? "gpt-gradcheck" : "gpt-gradcheck-untied";
  c.kind = model::ModelKind::kGpt;
  c.vocab = 11;
  c.context = 5;
  c.dim = 8;
  c.heads = 2;
  c.layers = 2;
  c.mlp_hidden = 12;
  c.tied_head = tied;
  return c;
}

// Random values of the right kind: gains near 1, shifts and biases near 0 but
// not 0, weights large enough (0.3) that attention is far from uniform. With
// the real init (zero biases, unit gains) some gradient terms would vanish
// and a bug in them would go unseen.
inline std::vector<double> random_params(const model::ParamLayout& layout, std::uint64_t key) {
  std::vector<double> p(static_cast<std::size_t>(layout.size()));
  for (const model::ParamView& v : layout.views()) {
    for (std::int64_t i = 0; i < v.size; ++i) {
      const double z = model::normal(model::hash_key(key, model::hash_name(v.name), i));
      double value = 0.3 * z;
      if (v.init == model::ParamInit::kOnes) value = 1.0 + 0.2 * z;
      if (v.init == model::ParamInit::kZeros) value = 0.2 * z;
      p[static_cast<std::size_t>(v.offset + i)] = value;
    }
  }
  return p;
}

// n token ids in [0, vocab), keyed.
inline std::vector<std::int32_t> random_tokens(std::int64_t n, std::int64_t vocab,
                                               std::uint64_t key) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    t[static_cast<std::size_t>(i)] =
        static_cast<std::int32_t>(model::hash_key(key, i) % static_cast<std::uint64_t>(vocab));
  return t;
}

template <class T>
const T* cptr(const std::vector<T>& v) {
  return v.data();
}

}  // namespace dtw::testing
