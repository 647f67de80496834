// Must not compile: the model's layers (gpt_layers.h) are built for float and
// double only; a call with long double buffers deduces a third type.
#include "dtw/model/gpt_layers.h"

void linear_long_double(long double* y, const long double* x, const long double* w) {
  dtw::model::linear_forward(y, x, w, x, 1, 1, 1);
}
