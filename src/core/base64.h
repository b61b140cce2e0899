#pragma once
// RFC 4648 base64 (standard alphabet, '=' padding), decoded strictly.
#include <string>
#include <string_view>

namespace deepinfer {

// Appends the bytes of `text` to `out`. Returns false (out unspecified) for anything but
// canonical padded base64: a character outside the alphabet, a length that is not a multiple
// of 4, '=' other than at the end, or nonzero bits in the padding.
bool decode_base64(std::string_view text, std::string& out);

}  // namespace deepinfer
