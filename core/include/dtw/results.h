#pragma once
/// @file
/// Per-rank results: every rank's value of something, collected on rank 0 (or
/// on every rank) on any backend. This is how a test compares what the ranks
/// computed when the ranks are processes (mpi) and cannot write into one
/// shared vector:
///
///     dtw::launch(p, [&](dtw::Comm& comm) {
///       const double loss = train(comm);
///       const std::vector<double> all = dtw::gather_results(comm, loss);
///       if (comm.rank() == 0) EXPECT_EQ(all[0], all[p - 1]);
///     });
///
/// A result is a trivially copyable value, a std::string, or a std::vector of
/// results (so std::vector<float>, std::vector<std::string> and
/// std::vector<std::vector<int>> all work). Values may differ in size between
/// ranks. Both calls are collective over `comm` and built on the backend's
/// reference gather (MPI_Gather, ncclSend/Recv, or the threads backend's
/// fixed-order gather), staged through `comm.exec()` on a device backend.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "dtw/comm.h"
#include "dtw/errors.h"

namespace dtw {
namespace detail {

/// Appends values to a byte string (what a rank contributes).
class ResultWriter {
 public:
  void put_bytes(const void* data, std::size_t n) {
    const auto* p = static_cast<const std::byte*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
  }
  void put_count(std::size_t n) {
    const auto v = static_cast<std::int64_t>(n);
    put_bytes(&v, sizeof v);
  }
  std::vector<std::byte>& bytes() { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

/// Reads values back from one rank's byte string; a short string is an error
/// (the ranks then disagree on the result's type).
class ResultReader {
 public:
  explicit ResultReader(std::span<const std::byte> in) : in_(in) {}
  void get_bytes(void* out, std::size_t n) {
    DTW_CHECK(n <= in_.size() - pos_, InvalidArgument,
              "gather_results: a rank's value ended early (" << in_.size()
                  << " bytes): do all ranks pass the same result type?");
    if (n > 0) std::memcpy(out, in_.data() + pos_, n);
    pos_ += n;
  }
  // A count of elements of `elem_bytes` each (0: any size) that must fit in
  // what is left, so a corrupt count cannot make a huge allocation.
  std::size_t get_count(std::size_t elem_bytes) {
    std::int64_t v = 0;
    get_bytes(&v, sizeof v);
    DTW_CHECK(v >= 0 && (elem_bytes == 0 ||
                         static_cast<std::uint64_t>(v) <= (in_.size() - pos_) / elem_bytes),
              InvalidArgument,
              "gather_results: a rank's value holds a count of " << v << " that does not fit in its "
                  << in_.size() << " bytes: do all ranks pass the same result type?");
    return static_cast<std::size_t>(v);
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  std::span<const std::byte> in_;
  std::size_t pos_ = 0;
};

template <class R>
struct ResultCodec;  // the types gather_results takes specialise this

template <class T>
  requires std::is_trivially_copyable_v<T>
struct ResultCodec<T> {
  static void put(ResultWriter& w, const T& v) { w.put_bytes(&v, sizeof v); }
  static T get(ResultReader& r) {
    T v;
    r.get_bytes(&v, sizeof v);
    return v;
  }
};

template <>
struct ResultCodec<std::string> {
  static void put(ResultWriter& w, const std::string& s) {
    w.put_count(s.size());
    w.put_bytes(s.data(), s.size());
  }
  static std::string get(ResultReader& r) {
    std::string s(r.get_count(1), '\0');
    r.get_bytes(s.data(), s.size());
    return s;
  }
};

template <class T>
struct ResultCodec<std::vector<T>> {
  static void put(ResultWriter& w, const std::vector<T>& v) {
    w.put_count(v.size());
    if constexpr (std::is_trivially_copyable_v<T>) {
      w.put_bytes(v.data(), v.size() * sizeof(T));
    } else {
      for (const T& x : v) ResultCodec<T>::put(w, x);
    }
  }
  static std::vector<T> get(ResultReader& r) {
    const std::size_t n = r.get_count(std::is_trivially_copyable_v<T> ? sizeof(T) : 0);
    std::vector<T> v;
    if constexpr (std::is_trivially_copyable_v<T>) {
      v.resize(n);
      r.get_bytes(v.data(), n * sizeof(T));
    } else {
      for (std::size_t i = 0; i < n; ++i) v.push_back(ResultCodec<T>::get(r));
    }
    return v;
  }
};

/// Every rank's `mine`, on rank 0 only (`all` false: others get an empty
/// vector) or on every rank (`all` true). Collective over `comm`.
std::vector<std::vector<std::byte>> gather_bytes(Comm& comm, std::span<const std::byte> mine,
                                                 bool all);

template <class R>
std::vector<R> decode_results(const std::vector<std::vector<std::byte>>& blobs) {
  std::vector<R> out;
  out.reserve(blobs.size());
  for (const auto& blob : blobs) {
    ResultReader reader(blob);
    out.push_back(ResultCodec<R>::get(reader));
    DTW_CHECK(reader.done(), InvalidArgument,
              "gather_results: a rank's value has " << blob.size()
                  << " bytes, more than its type reads: do all ranks pass the same result type?");
  }
  return out;
}

}  // namespace detail

/// A type gather_results can carry: trivially copyable, std::string, or a
/// std::vector of those (nested vectors too).
template <class R>
concept Result = requires(detail::ResultWriter& w, detail::ResultReader& r, const R& v) {
  detail::ResultCodec<R>::put(w, v);
  { detail::ResultCodec<R>::get(r) } -> std::same_as<R>;
};

/// Collective: rank 0 gets every rank's `value` in rank order; the other ranks
/// get an empty vector.
template <Result R>
std::vector<R> gather_results(Comm& comm, const R& value) {
  detail::ResultWriter w;
  detail::ResultCodec<R>::put(w, value);
  return detail::decode_results<R>(detail::gather_bytes(comm, w.bytes(), false));
}

/// Collective: every rank gets every rank's `value` in rank order.
template <Result R>
std::vector<R> allgather_results(Comm& comm, const R& value) {
  detail::ResultWriter w;
  detail::ResultCodec<R>::put(w, value);
  return detail::decode_results<R>(detail::gather_bytes(comm, w.bytes(), true));
}

}  // namespace dtw
