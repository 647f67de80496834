#pragma once
/// @file
/// Embedding lookup and its gradient on a CUDA device (built only where CUDA
/// was found: DTW_HAVE_CUDA in dtw/config.h), mirroring embedding.h. All
/// pointers are device memory; the stream is a `cudaStream_t` passed as
/// `void*` (nullptr: the default stream) so that this header needs no CUDA
/// header. Calls enqueue on the stream and return without waiting, except
/// device_embedding_check_ids, which returns a verdict to the host.
///
/// Ids out of range: the host functions read every id before any work, but
/// here the ids are in device memory, and reading them back would make every
/// call wait on the stream. So checking them is the caller's duty, done with
/// device_embedding_check_ids where the ids come from (once per batch). The
/// kernels themselves never read or write outside the table: the forward
/// writes NaN to the output row of a bad id (so a missed check shows up in
/// the loss, not as a silently wrong row), and the backward drops its
/// contribution.

#include <cstdint>

namespace dtw::kernels {

/// `out[i][:] = table[ids[i]][:]` (with `accumulate`, `+=`) for n ids, rows
/// of length dim, on `stream`. The host embedding_forward's size checks
/// (InvalidArgument naming the sizes), plus: no null pointer when n·dim > 0.
/// An id outside [0, table_rows) makes row i NaN (see the file comment).
/// n or dim 0 launches nothing. Throws dtw::CudaError when the launch fails.
template <class T>
void device_embedding_forward(T* out, const std::int32_t* ids, const T* table, std::int64_t n,
                              std::int64_t dim, std::int64_t table_rows, bool accumulate = false,
                              void* stream = nullptr);

/// `dtable[ids[i]][:] += dout[i][:]` on `stream` (accumulates into dtable,
/// like the host). Deterministic and without atomics: token positions are
/// sorted by id (a stable radix sort), then each (id, column) element adds
/// its tokens' rows in token order, starting from dtable's value -- the host
/// reference's order exactly, so the result equals it bit for bit. Contributions
/// of ids outside [0, table_rows) are dropped (see the file comment). Needs
/// n <= INT32_MAX (positions are sorted as 32-bit values) and temporary device
/// memory of about 12·n bytes plus CUB's scratch, taken with cudaMallocAsync
/// and returned with cudaFreeAsync on `stream`. n or dim 0 launches nothing.
/// Throws dtw::CudaError when a CUDA call fails.
template <class T>
void device_embedding_backward(T* dtable, const std::int32_t* ids, const T* dout, std::int64_t n,
                               std::int64_t dim, std::int64_t table_rows, void* stream = nullptr);

/// Checks that every one of the n device ids lies in [0, table_rows); waits
/// on `stream`. Raises InvalidArgument naming the first bad index, its id and
/// table_rows, as the host embedding kernels do (`what` starts the message).
void device_embedding_check_ids(const std::int32_t* ids, std::int64_t n, std::int64_t table_rows,
                                const char* what = "device_embedding_check_ids",
                                void* stream = nullptr);

}  // namespace dtw::kernels
