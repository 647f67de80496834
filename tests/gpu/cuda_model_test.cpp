// The model on a device Place (Gpt::set_place, Mlp::set_place): parameters,
// gradients, activations, caches and scratch on the GPU, every kernel on the
// Place's stream, the host reading only the loss. The same forward and
// backward as on the host, to rounding: in double the gradients agree to
// 1e-10 of their scale (cuBLAS and the host BLAS sum in other orders, ~1e-15
// per product), in float to 1e-4 (see GptTest.FloatModelMatchesDoubleModel).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "dtw/model/gpt.h"
#include "dtw/model/mlp.h"
#include "gpu_test.h"
#include "model_test_util.h"

namespace dtw::model {
namespace {

using dtw::testing::to_device;

using dtw::testing::Stream;

template <class T>
double tolerance() {
  return sizeof(T) == 8 ? 1e-10 : 1e-4;
}

// max |a − b| over max(1, max |a|): the gradients' agreement at their scale.
template <class T>
double scaled_difference(const std::vector<T>& a, const std::vector<T>& b) {
  double worst = 0, scale = 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::abs(static_cast<double>(a[i])));
  }
  return worst / scale;
}

template <class T>
class CudaModelTest : public ::testing::Test {};
using Reals = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CudaModelTest, Reals);

TYPED_TEST(CudaModelTest, GptOnTheDeviceMatchesTheHost) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  Stream stream;
  const kernels::Place at = kernels::Place::cuda(0, stream.s);
  for (const ModelConfig& c : {model_config("gpt-tiny"), testing::gradcheck_gpt(false)}) {
    SCOPED_TRACE(c.name + (c.tied_head ? " (tied)" : " (untied)"));
    const std::int64_t batch = 3, seq = c.context;
    Gpt<T> host(c), device(c);
    device.set_place(at);
    const std::vector<double> pd = testing::random_params(host.layout(), 71);
    const std::vector<T> p(pd.begin(), pd.end());
    const auto tokens = testing::random_tokens(batch * seq, c.vocab, 72);
    const auto targets = testing::random_tokens(batch * seq, c.vocab, 73);
    std::vector<T> g(p.size(), T(0));
    const T loss = host.forward(p.data(), tokens.data(), targets.data(), batch, seq);
    host.backward(p.data(), g.data());

    auto dp = to_device(p);
    auto dg = to_device(std::vector<T>(p.size(), T(0)));
    // Token ids and targets are the host's (the data loader's); the model
    // checks them and copies them to its Place.
    const T dloss = device.forward(dp.data(), tokens.data(), targets.data(), batch, seq);
    device.backward(dp.data(), dg.data());
    DTW_CUDA_CHECK(cudaStreamSynchronize(stream.s));
    EXPECT_NEAR(static_cast<double>(dloss), static_cast<double>(loss),
                tolerance<T>() * std::abs(static_cast<double>(loss)));
    EXPECT_LE(scaled_difference(g, dg.download()), tolerance<T>());
    EXPECT_EQ(device.logits().place(), at) << "the logits live where the model runs";
    EXPECT_EQ(device.activations().x[1].place(), at);
    EXPECT_EQ(device.activations().tokens.place(), at);
    const std::vector<T> dl = device.logits().to_vector();
    EXPECT_LE(scaled_difference(std::vector<T>(host.logits().begin(), host.logits().end()), dl),
              tolerance<T>());
  }
}

TYPED_TEST(CudaModelTest, MlpOnTheDeviceMatchesTheHost) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  Stream stream;
  const kernels::Place at = kernels::Place::cuda(0, stream.s);
  const ModelConfig c = model_config("mlp-tiny");
  Mlp<T> host(c), device(c);
  device.set_place(at);
  const std::vector<double> pd = testing::random_params(host.layout(), 81);
  const std::vector<T> p(pd.begin(), pd.end());
  const std::int64_t rows = 12;
  std::vector<T> inputs(static_cast<std::size_t>(rows * c.features));
  for (std::size_t i = 0; i < inputs.size(); ++i) inputs[i] = static_cast<T>(std::sin(0.37 * i));
  const auto labels = testing::random_tokens(rows, c.classes, 82);
  std::vector<T> g(p.size(), T(0));
  const T loss = host.forward(p.data(), inputs.data(), labels.data(), rows);
  host.backward(p.data(), g.data());
  auto dp = to_device(p), dx = to_device(inputs);
  auto dg = to_device(std::vector<T>(p.size(), T(0)));
  const T dloss = device.forward(dp.data(), dx.data(), labels.data(), rows);
  device.backward(dp.data(), dg.data());
  DTW_CUDA_CHECK(cudaStreamSynchronize(stream.s));
  EXPECT_NEAR(static_cast<double>(dloss), static_cast<double>(loss),
              tolerance<T>() * std::abs(static_cast<double>(loss)));
  EXPECT_LE(scaled_difference(g, dg.download()), tolerance<T>());
}

}  // namespace
}  // namespace dtw::model
