// Must not compile: the training layer's Replica is built for float and
// double only.
#include "dtw/train/replica.h"

void step_shorts(dtw::train::Replica<short>& replica) { replica.step(0); }
