#include "core/sha256.h"

#include <gtest/gtest.h>

#include <string>

namespace deepinfer {
namespace {

// FIPS 180-2 appendix B / NIST CAVS test vectors.
TEST(Sha256, MatchesTheStandardTestVectors) {
  Sha256 empty;
  EXPECT_EQ(empty.hex_digest(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256 abc;
  abc.update("abc");
  EXPECT_EQ(abc.hex_digest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 two_blocks;
  two_blocks.update("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq");
  EXPECT_EQ(two_blocks.hex_digest(),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, StreamingInPiecesEqualsOneUpdate) {
  const std::string million(1000000, 'a');
  Sha256 pieces;
  for (size_t i = 0; i < million.size(); i += 777)
    pieces.update(million.data() + i, std::min<size_t>(777, million.size() - i));
  EXPECT_EQ(pieces.hex_digest(),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

}  // namespace
}  // namespace deepinfer
