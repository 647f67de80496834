#pragma once
/// @file
/// Bias add, GELU and add_into on a CUDA device (built only where CUDA was
/// found: DTW_HAVE_CUDA in dtw/config.h): the device twins of
/// dtw/kernels/activations.h, with the same arguments in the same order and
/// the stream last. The stream is a `void*` so that this header needs no CUDA
/// header; pass a `cudaStream_t`, or nullptr for the default stream.
///
/// Every pointer is device (or managed) memory. Calls run on the current
/// device, enqueue on `stream` and return before the kernel finishes. Sizes
/// are checked before any CUDA call: a negative one raises
/// dtw::InvalidArgument naming the value (also on a machine without a GPU); a
/// size of 0 launches nothing; a failed launch raises dtw::CudaError. No kernel
/// uses atomics, so every result is bitwise the same run to run. Safe to call
/// from many host threads at once. T is float or double.

#include <cstdint>

namespace dtw::kernels {

/// `y[r][c] += bias[c]` for a rows×cols matrix y: bitwise what bias_add gives.
template <class T>
void device_bias_add(T* y, const T* bias, std::int64_t rows, std::int64_t cols,
                     void* stream = nullptr);

/// `dbias[c] += sum over r of dy[r][c]`, summed in double -- in chunks of 64
/// rows, each in row order, then the chunks in order, so the result can differ
/// from bias_backward_reference's single row-order sum by the rounding of a
/// double sum (not at all once rounded to float, as a rule) -- then added to
/// dbias once. Takes rows/64·cols doubles of scratch from the stream's memory
/// pool (cudaMallocAsync) and returns them on the stream.
template <class T>
void device_bias_backward(T* dbias, const T* dy, std::int64_t rows, std::int64_t cols,
                          void* stream = nullptr);

/// GELU with the tanh approximation, `y = x/2 · (1 + tanh(√(2/π)(x + 0.044715x³)))`,
/// for n elements, computed as gelu_forward does (x / (1 + e^(−2u)), the
/// exponent clamped so the result stays finite). y may alias x.
template <class T>
void device_gelu_forward(T* y, const T* x, std::int64_t n, void* stream = nullptr);

/// `dx = dy · gelu'(x)` for n elements (overwrites dx; dx may alias dy).
template <class T>
void device_gelu_backward(T* dx, const T* x, const T* dy, std::int64_t n, void* stream = nullptr);

/// `y[i] += x[i]` for n elements: bitwise what add_into gives.
template <class T>
void device_add_into(T* y, const T* x, std::int64_t n, void* stream = nullptr);

}  // namespace dtw::kernels
