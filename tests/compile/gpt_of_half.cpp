// Must not compile: the model (Gpt) is built for float and double only; a
// 16-bit type is the likely mistake, and int16_t stands in for one here.
#include <cstdint>

#include "dtw/model/gpt.h"

void backward_int16(dtw::model::Gpt<std::int16_t>& gpt, const std::int16_t* params,
                    std::int16_t* grads) {
  gpt.backward(params, grads);
}
