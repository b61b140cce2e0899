#include "engine/stop_text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace deepinfer::engine {
namespace {

// Feeds pieces one by one; returns what was streamed (joined) and each push's output.
struct Fed {
  std::string streamed;
  std::vector<std::string> outputs;
};

Fed feed(StopTextFilter& f, const std::vector<std::string>& pieces, bool finish = true) {
  Fed r;
  for (const auto& p : pieces) {
    r.outputs.push_back(f.push(p));
    r.streamed += r.outputs.back();
  }
  if (finish) r.streamed += f.finish();
  return r;
}

TEST(StopTextFilter, NoStopStringsStreamsEverythingAtOnce) {
  StopTextFilter f({});
  const auto r = feed(f, {"Hel", "lo", " world"}, false);
  EXPECT_EQ(r.outputs, (std::vector<std::string>{"Hel", "lo", " world"}));
  EXPECT_FALSE(f.stopped());
}

TEST(StopTextFilter, StopStringSplitAcrossPiecesIsCutAndNeverStreamed) {
  StopTextFilter f({"STOP"});
  const auto r = feed(f, {"abc S", "T", "O", "Pxyz"});
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(f.matched_stop(), "STOP");
  EXPECT_EQ(r.streamed, "abc ");
  EXPECT_EQ(f.text(), "abc ");
  // "S", "ST", "STO" were held back while they could still start the stop string.
  EXPECT_EQ(r.outputs, (std::vector<std::string>{"abc ", "", "", ""}));
  EXPECT_EQ(f.push("more"), "");
}

TEST(StopTextFilter, FalseStartIsReleasedOnceItCannotMatch) {
  StopTextFilter f({"STOP"});
  const auto r = feed(f, {"ST", "ART", "!"}, false);
  EXPECT_EQ(r.outputs, (std::vector<std::string>{"", "START", "!"}));
  EXPECT_FALSE(f.stopped());
  // Held-back text comes out when generation ends without a match.
  StopTextFilter g({"STOP"});
  EXPECT_EQ(g.push("end ST"), "end ");
  EXPECT_EQ(g.finish(), "ST");
}

TEST(StopTextFilter, EarliestOfSeveralStopStringsWins) {
  StopTextFilter f({"world", "lo w", "\n\n"});
  const auto r = feed(f, {"hel", "lo wor", "ld"});
  EXPECT_EQ(f.matched_stop(), "lo w");
  EXPECT_EQ(r.streamed, "hel");
}

TEST(StopTextFilter, MultiByteStopStringAcrossPiecesKeepsUtf8Whole) {
  // "é" is C3 A9 and "→" is E2 86 92: pieces are whole characters, as the detokenizer gives.
  StopTextFilter f({"\xC3\xA9\xE2\x86\x92"});
  const auto r = feed(f, {"caf", "\xC3\xA9", "\xE2\x86\x92", " tail"});
  EXPECT_EQ(r.streamed, "caf");
  EXPECT_EQ(r.outputs[1], "");  // "é" held: it may begin the stop string
  StopTextFilter g({"\xC3\xA9\xE2\x86\x92"});
  const auto s = feed(g, {"caf", "\xC3\xA9", "!"});
  EXPECT_EQ(s.outputs, (std::vector<std::string>{"caf", "", "\xC3\xA9!"}));
}

TEST(StopTextFilter, StopAtTheVeryStartYieldsNoText) {
  StopTextFilter f({"ab"});
  const auto r = feed(f, {"a", "b", "c"});
  EXPECT_EQ(r.streamed, "");
  EXPECT_TRUE(f.stopped());
}

}  // namespace
}  // namespace deepinfer::engine
