#pragma once
/// @file
/// The bodies of `dtw::Comm`'s typed calls (declared, with their contracts, in
/// dtw/comm.h, which includes this file after the class): each checks where
/// the range's memory lives, views it as an untyped Buffer and calls the
/// untyped form. Include dtw/comm.h, not this file.

#include <cstdint>
#include <ranges>
#include <type_traits>

#include "dtw/comm.h"

namespace dtw {

template <detail::ElementRange R>
void Comm::send(const R& data, int peer, int tag) {
  check_place(data, "send");
  send_buffer(detail::const_view(data), peer, tag);
}

template <detail::ElementRange R>
std::int64_t Comm::recv(R&& data, int peer, int tag) {
  check_place(data, "recv");
  return recv_buffer(detail::mutable_view(data), peer, tag);
}

template <detail::ElementRange R>
Request Comm::isend(const R& data, int peer, int tag) {
  check_place(data, "isend");
  return isend_buffer(detail::const_view(data), peer, tag);
}

template <detail::ElementRange R>
  requires(!std::is_lvalue_reference_v<R> && !std::ranges::borrowed_range<R>)
Request Comm::isend(R&& data, int peer, int tag) {
  static_assert(sizeof(R) == 0, "isend of a temporary container: keep the buffer in a variable until wait");
  return {};
}

template <detail::ElementRange R>
Request Comm::irecv(R&& data, int peer, int tag) {
  static_assert(std::is_lvalue_reference_v<R> || std::ranges::borrowed_range<R>,
                "irecv into a temporary container: keep the buffer in a variable until wait");
  check_place(data, "irecv");
  return irecv_buffer(detail::mutable_view(data), peer, tag);
}

template <detail::ElementRange S, detail::ElementRange R>
std::int64_t Comm::sendrecv(const S& out, int dst, R&& in, int src, int tag) {
  check_place(out, "sendrecv");
  check_place(in, "sendrecv");
  return sendrecv_buffer(detail::const_view(out), dst, detail::mutable_view(in), src, tag);
}

template <detail::ElementRange R>
void Comm::recv_reduce(R&& inout, int src, ReduceOp op, int tag) {
  check_place(inout, "recv_reduce");
  recv_reduce_buffer(detail::mutable_view(inout), src, op, tag);
}

template <detail::ElementRange R>
Request Comm::irecv_reduce(R&& inout, int src, ReduceOp op, int tag) {
  static_assert(std::is_lvalue_reference_v<R> || std::ranges::borrowed_range<R>,
                "irecv_reduce into a temporary container: keep the buffer in a variable until wait");
  check_place(inout, "irecv_reduce");
  return irecv_reduce_buffer(detail::mutable_view(inout), src, op, tag);
}

template <detail::ElementRange D, detail::ElementRange S>
void Comm::copy_local(D&& dst, const S& src) {
  static_assert(std::is_same_v<std::ranges::range_value_t<D>,
                               std::remove_cv_t<std::ranges::range_value_t<S>>>,
                "copy_local: dst and src must have the same element type");
  copy_local(detail::mutable_view(dst), detail::const_view(src));
}

template <detail::ElementRange D, detail::ElementRange S>
void Comm::reduce_local(D&& inout, const S& in, ReduceOp op) {
  reduce_local(detail::mutable_view(inout), detail::const_view(in), op);
}

template <detail::ElementRange R>
void Comm::divide_local(R&& data, int divisor) {
  divide_local(detail::mutable_view(data), divisor);
}

}  // namespace dtw
