// build_id: the GNU build id of the object holding this code, as readelf -n shows it (40 hex
// digits for Debian's default sha1 ids), the same on every call.
#include <gtest/gtest.h>

#include "core/build_id.h"

namespace deepinfer {
namespace {

TEST(BuildId, IsTheLinkersHexIdAndStable) {
  const std::string id = build_id();
  ASSERT_FALSE(id.empty());
  if (id.rfind("version-", 0) == 0) GTEST_SKIP() << "linked without --build-id: " << id;
  EXPECT_GE(id.size(), 16u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  EXPECT_EQ(build_id(), id);
}

}  // namespace
}  // namespace deepinfer
