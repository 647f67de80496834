// kernels::Vector on the host: it must behave as the std::vector it replaced
// in the model's caches (contents kept on growth, new elements zero, copies
// deep, spans over it), and refuse what only the host may do on a device
// Place with a message that names the Place. The device half is
// tests/gpu/cuda_buffer_test.cpp.
#include "dtw/kernels/vector.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dtw/errors.h"

namespace dtw::kernels {
namespace {

std::vector<double> values(const Vector<double>& b) {
  return {b.begin(), b.end()};
}

TEST(VectorTest, ResizeKeepsTheValuesAndZeroesTheNewOnes) {
  Vector<double> b;
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.data(), nullptr);
  b.resize(3);
  EXPECT_EQ(values(b), (std::vector<double>{0, 0, 0}));
  b[0] = 1.5;
  b[2] = -2;
  b.resize(70);  // grows: a new allocation, the old values copied over
  ASSERT_EQ(b.size(), 70u);
  EXPECT_EQ(b[0], 1.5);
  EXPECT_EQ(b[1], 0.0);
  EXPECT_EQ(b[2], -2.0);
  for (std::size_t i = 3; i < b.size(); ++i) ASSERT_EQ(b[i], 0.0) << "index " << i;
  b.resize(2);  // shrinks in place, then grows back: the dropped ones are zero again
  b.resize(3);
  EXPECT_EQ(values(b), (std::vector<double>{1.5, 0, 0}));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 64, 0u)
      << "host memory is 64-byte aligned";
}

TEST(VectorTest, ClearKeepsTheMemoryShrinkToFitGivesItBack) {
  Vector<float> b(100);
  const float* before = b.data();
  b.clear();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.capacity(), 100u);
  b.resize(50);
  EXPECT_EQ(b.data(), before) << "a resize within the capacity allocates nothing";
  b.clear();
  b.shrink_to_fit();
  EXPECT_EQ(b.capacity(), 0u);
  EXPECT_EQ(b.data(), nullptr);
}

TEST(VectorTest, AssignInsertAndToVector) {
  Vector<std::int32_t> b(4, 7);
  EXPECT_EQ(b.to_vector(), (std::vector<std::int32_t>{7, 7, 7, 7}));
  const std::vector<std::int32_t> ids = {3, 1, 4, 1, 5};
  b.assign(ids.begin(), ids.end());
  EXPECT_EQ(b.to_vector(), ids);
  const std::int32_t more[] = {9, 2};
  b.insert(b.end(), more, more + 2);
  EXPECT_EQ(b.to_vector(), (std::vector<std::int32_t>{3, 1, 4, 1, 5, 9, 2}));
  EXPECT_THROW(b.insert(b.begin(), more, more + 2), InvalidArgument);
  Vector<std::int32_t> listed{1, 2, 3};
  EXPECT_EQ(listed.to_vector(), (std::vector<std::int32_t>{1, 2, 3}));
}

TEST(VectorTest, CopiesAreDeepMovesAndSwapsTakeTheMemory) {
  Vector<double> a(5, 2.0);
  Vector<double> b = a;
  b[0] = 9;
  EXPECT_EQ(a[0], 2.0);
  EXPECT_NE(a.data(), b.data());
  a = b;
  EXPECT_EQ(values(a), values(b));
  const double* memory = b.data();
  Vector<double> c = std::move(b);
  EXPECT_EQ(c.data(), memory);
  EXPECT_TRUE(b.empty());    // NOLINT(bugprone-use-after-move): moved-from is empty, as documented
  Vector<double>().swap(c);  // the idiom that frees a buffer
  EXPECT_EQ(c.capacity(), 0u);
}

TEST(VectorTest, SpansAreMadeOverIt) {
  Vector<double> b(4, 1.0);
  const std::span<double> s = b;
  s[3] = 4;
  const Vector<double>& cb = b;
  const std::span<const double> cs = cb;
  EXPECT_EQ(cs.size(), 4u);
  EXPECT_EQ(cs[3], 4.0);
  EXPECT_EQ(cs.data(), b.data());
}

TEST(VectorTest, AHostPlaceChangeKeepsTheValues) {
  Vector<double> b(3, 5.0);
  b.set_place(Place::host());
  EXPECT_EQ(values(b), (std::vector<double>{5, 5, 5}));
  EXPECT_TRUE(b.place().is_host());
}

// On a device Place host-side element access is refused before anything is
// read (no device memory exists here: nothing is allocated for an empty buffer).
TEST(VectorTest, HostAccessOnADevicePlaceIsRefusedNamingThePlace) {
  Vector<double> b(Place::cuda(3));
  EXPECT_TRUE(b.empty());
  try {
    (void)b[0];
    FAIL() << "operator[] on a device buffer must throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("to_vector"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dtw::kernels
