// dtw_lab_bench_collectives (`dtw bench collectives --lab`): the rows time the
// learner's chapter 01 lab; an algorithm not written yet stops the report at
// its step.
#include "report.h"

namespace dtw::bench {
const char* const kRowsCode = "your chapter 01 lab (labs/01-collectives)";
}  // namespace dtw::bench
