// Local operations on a rank's message memory (copy, divide, reduce): a
// memmove, a loop and the reduce kernel on the host; device backends override
// the do_ functions.
#include <cstdint>
#include <cstring>

#include "dtw/comm.h"
#include "dtw/errors.h"
#include "dtw/kernels/reduce.h"
#include "who.h"

namespace dtw {

using detail::who;

void Comm::reduce_local(Buffer inout, ConstBuffer in, ReduceOp op) {
  DTW_CHECK_ARG(inout.type == in.type, who(rank_, world_rank()) << ": reduce_local: inout holds "
                                           << name_of(inout.type) << " but in holds " << name_of(in.type));
  DTW_CHECK_ARG(inout.count == in.count, who(rank_, world_rank()) << ": reduce_local: inout has "
                                             << inout.count << " elements but in has " << in.count);
  DTW_CHECK_ARG(inout.type != DataType::kByte,
                who(rank_, world_rank()) << ": reduce_local: cannot reduce raw bytes");
  check_count(inout.count, "reduce_local");
  if (inout.count == 0) return;
  do_reduce_local(inout, in, op);
}

void Comm::do_reduce_local(Buffer inout, ConstBuffer in, ReduceOp op) {
  kernels::reduce_into(inout, in, op);
}


void Comm::copy_local(Buffer dst, ConstBuffer src) {
  DTW_CHECK_ARG(dst.type == src.type, who(rank_, world_rank()) << ": copy_local: dst holds "
                                          << name_of(dst.type) << " but src holds " << name_of(src.type));
  DTW_CHECK_ARG(dst.count == src.count, who(rank_, world_rank()) << ": copy_local: dst has " << dst.count
                                            << " elements but src has " << src.count);
  check_count(dst.count, "copy_local");
  if (dst.count == 0 || dst.data == src.data) return;
  do_copy_local(dst, src);
}

void Comm::do_copy_local(Buffer dst, ConstBuffer src) {
  std::memmove(dst.data, src.data, static_cast<std::size_t>(src.bytes()));
}

void Comm::divide_local(Buffer data, int divisor) {
  DTW_CHECK_ARG(divisor > 0, who(rank_, world_rank()) << ": divide_local by " << divisor
                                 << ": the divisor must be positive");
  DTW_CHECK_ARG(data.type != DataType::kByte,
                who(rank_, world_rank()) << ": divide_local: cannot divide raw bytes");
  check_count(data.count, "divide_local");
  if (data.count == 0 || divisor == 1) return;
  do_divide_local(data, divisor);
}

void Comm::do_divide_local(Buffer data, int divisor) { kernels::divide(data, divisor); }

}  // namespace dtw
