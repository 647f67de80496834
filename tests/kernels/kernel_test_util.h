// Helpers shared by the kernel tests (tests/kernels/*_test.cpp): keyed random
// inputs, bitwise comparison, the InvalidArgument check, and the harness that
// calls a kernel from many threads at once and compares with lone calls.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <latch>
#include <limits>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dtw/errors.h"
#include "dtw/model/random.h"
#include "gradcheck.h"

namespace dtw::kernel_test {

// The element types the kernels are templated on.
using RealTypes = ::testing::Types<float, double>;

inline constexpr double kDoubleEps = std::numeric_limits<double>::epsilon();

// A [rows, cols] row-major matrix.
struct MatrixShape {
  std::int64_t rows, cols;
};

// n values drawn from N(offset, scale²) in double, then rounded to T; the same
// key gives the same values.
template <class T>
std::vector<T> random_values(std::int64_t n, std::uint64_t key, double scale = 1.0,
                             double offset = 0.0) {
  std::vector<double> v = testing::random_vector(n, key, scale);
  for (double& x : v) x += offset;
  return {v.begin(), v.end()};
}

// n indices uniform in [0, bound) (token ids, class targets); with n > bound
// some repeat.
inline std::vector<std::int32_t> random_indices(std::int64_t n, std::int64_t bound,
                                                std::uint64_t key) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const double u = model::uniform01(model::hash_key(key, static_cast<std::uint64_t>(i)));
    ids[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(u * static_cast<double>(bound));
  }
  return ids;
}

// Same size and the same bytes: what a kernel must give whatever other threads
// do, and what two code paths doing the same roundings must agree on.
template <class T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  // memcmp of zero bytes still needs valid pointers, and empty vectors have none.
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// `call()` must throw InvalidArgument whose message contains every needle (the
// values it names). Nothing thrown is a failure; another exception type escapes
// and fails the test.
template <class F>
void expect_invalid(F&& call, std::initializer_list<std::string_view> needles) {
  try {
    call();
  } catch (const InvalidArgument& e) {
    for (std::string_view needle : needles)
      EXPECT_THAT(e.what(), ::testing::HasSubstr(std::string(needle)));
    return;
  }
  std::string wanted;
  for (std::string_view needle : needles) wanted += " '" + std::string(needle) + "'";
  ADD_FAILURE() << "no InvalidArgument thrown; expected one mentioning" << wanted;
}

template <class F>
void expect_invalid(F&& call, std::string_view needle) {
  expect_invalid(call, {needle});
}

inline constexpr int kThreads = 8;

// Runs compute(t) for each t < kThreads alone, then again on kThreads threads
// released together by a latch so that they are inside the kernels at once.
// compute(t) returns thread t's outputs (a vector of vectors); each must equal
// the lone call's bit for bit: a kernel's result may not depend on what other
// threads do meanwhile. Returns the serial outputs for further checks.
template <class Compute>
auto expect_concurrent_matches_serial(const Compute& compute) {
  using Outputs = decltype(compute(0));
  std::vector<Outputs> serial(kThreads), concurrent(kThreads);
  for (int t = 0; t < kThreads; ++t) serial[static_cast<std::size_t>(t)] = compute(t);
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      concurrent[static_cast<std::size_t>(t)] = compute(t);
    });
  }
  for (std::thread& th : threads) th.join();
  for (std::size_t t = 0; t < serial.size(); ++t) {
    EXPECT_EQ(serial[t].size(), concurrent[t].size()) << "thread " << t;
    for (std::size_t i = 0; i < serial[t].size() && i < concurrent[t].size(); ++i)
      EXPECT_TRUE(bitwise_equal(serial[t][i], concurrent[t][i]))
          << "thread " << t << " output " << i;
  }
  return serial;
}

}  // namespace dtw::kernel_test
