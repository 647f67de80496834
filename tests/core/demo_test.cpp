// Demos' figures: a bandwidth keeps three significant digits whatever its size
// (`dtw run ring-allreduce --ranks 1024` printed "algbw 0.00 GB/s", issue 29).
#include <gtest/gtest.h>

#include "dtw/demo.h"

namespace dtw {
namespace {

TEST(DemoTest, BandwidthKeepsThreeSignificantDigitsInAFittingUnit) {
  EXPECT_EQ(bandwidth_text(12.34e9), "12.3 GB/s");
  EXPECT_EQ(bandwidth_text(5.8e9), "5.80 GB/s");
  EXPECT_EQ(bandwidth_text(4.17e6), "4.17 MB/s");  // printed as "0.00 GB/s"
  EXPECT_EQ(bandwidth_text(123.4e3), "123 kB/s");
  EXPECT_EQ(bandwidth_text(950), "950 B/s");
  EXPECT_EQ(bandwidth_text(999.96e6), "1.00 GB/s");  // rounded before the unit is chosen
  EXPECT_EQ(bandwidth_text(2.5e12), "2.50 TB/s");
  EXPECT_EQ(bandwidth_text(0), "0 B/s");
}

}  // namespace
}  // namespace dtw
