// A small strict XML 1.0 well-formedness checker and tree, for the SVG files heed writes.
//
// It accepts what a well-formed document may contain short of a DTD: an optional XML declaration,
// comments, processing instructions, CDATA sections, one root element, elements with attributes
// (quoted, unique per element, no '<' and only valid references in values), character data with
// only valid references (&lt; &gt; &amp; &quot; &apos; &#N; &#xN;), no "]]>" in text, and every
// start tag closed by a matching end tag. It rejects everything else with a message naming the
// offset. Names are checked against XML's ASCII name characters (bytes >= 0x80 are allowed in
// names and text, as UTF-8). The project has no XML library; this keeps the tests dependency-free.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace heed::test {

struct XmlElement {
  std::string name;
  std::map<std::string, std::string> attrs;  ///< values with references resolved
  std::vector<std::unique_ptr<XmlElement>> children;
  std::string text;  ///< the character data directly inside this element, references resolved

  std::string attr(const std::string& key) const {
    auto it = attrs.find(key);
    return it == attrs.end() ? std::string() : it->second;
  }
  /// Every descendant (this one included) for which `pred` holds, in document order.
  template <class Pred>
  void find_all(Pred pred, std::vector<const XmlElement*>& out) const {
    if (pred(*this)) out.push_back(this);
    for (const auto& c : children) c->find_all(pred, out);
  }
  std::vector<const XmlElement*> elements(const std::string& tag, const std::string& cls = "") const {
    std::vector<const XmlElement*> out;
    find_all([&](const XmlElement& e) { return e.name == tag && (cls.empty() || e.attr("class") == cls); }, out);
    return out;
  }
  /// All character data below this element, concatenated in document order.
  std::string all_text() const {
    std::string s = text;
    for (const auto& c : children) s += c->all_text();
    return s;
  }
};

class XmlError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class XmlParser {
 public:
  /// Parses `doc`; throws XmlError (with the byte offset) if it is not well-formed.
  static std::unique_ptr<XmlElement> parse(const std::string& doc) {
    XmlParser p(doc);
    return p.document();
  }

 private:
  explicit XmlParser(const std::string& s) : s_(s) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw XmlError("XML not well-formed at offset " + std::to_string(i_) + ": " + what);
  }
  bool at_end() const { return i_ >= s_.size(); }
  bool starts(const char* lit) const { return s_.compare(i_, std::char_traits<char>::length(lit), lit) == 0; }
  void expect(const char* lit) {
    if (!starts(lit)) fail(std::string("expected \"") + lit + "\"");
    i_ += std::char_traits<char>::length(lit);
  }
  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
  void skip_space() {
    while (!at_end() && is_space(s_[i_])) ++i_;
  }
  static bool name_start(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || c >= 0x80;
  }
  static bool name_char(unsigned char c) {
    return name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
  }
  // XML 1.0 Char: tab, newline, carriage return and everything from 0x20 up (as bytes).
  void check_char(unsigned char c) const {
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') fail("control character " + std::to_string(int(c)));
  }
  std::string name() {
    if (at_end() || !name_start(static_cast<unsigned char>(s_[i_]))) fail("expected a name");
    const size_t b = i_;
    while (!at_end() && name_char(static_cast<unsigned char>(s_[i_]))) ++i_;
    return s_.substr(b, i_ - b);
  }
  // After '&': a predefined entity or a character reference, up to and including ';'.
  std::string reference() {
    const size_t semi = s_.find(';', i_);
    if (semi == std::string::npos || semi - i_ > 12) fail("unterminated reference");
    const std::string ref = s_.substr(i_, semi - i_);
    i_ = semi + 1;
    if (ref == "lt") return "<";
    if (ref == "gt") return ">";
    if (ref == "amp") return "&";
    if (ref == "quot") return "\"";
    if (ref == "apos") return "'";
    if (ref.size() >= 2 && ref[0] == '#') {
      const bool hex = ref[1] == 'x';
      const std::string digits = ref.substr(hex ? 2 : 1);
      if (digits.empty()) fail("empty character reference");
      uint32_t v = 0;
      for (char c : digits) {
        int d = (c >= '0' && c <= '9') ? c - '0' : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                 : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) fail("bad character reference &" + ref + ";");
        v = v * (hex ? 16 : 10) + uint32_t(d);
        if (v > 0x10FFFF) fail("character reference out of range");
      }
      if ((v < 0x20 && v != 9 && v != 10 && v != 13) || (v >= 0xD800 && v <= 0xDFFF) || v == 0xFFFE || v == 0xFFFF)
        fail("character reference to a non-character");
      return utf8(v);
    }
    fail("unknown entity &" + ref + ";");
  }
  static std::string utf8(uint32_t c) {
    std::string o;
    if (c < 0x80) o += char(c);
    else if (c < 0x800) o += char(0xC0 | (c >> 6)), o += char(0x80 | (c & 0x3F));
    else if (c < 0x10000) o += char(0xE0 | (c >> 12)), o += char(0x80 | ((c >> 6) & 0x3F)), o += char(0x80 | (c & 0x3F));
    else
      o += char(0xF0 | (c >> 18)), o += char(0x80 | ((c >> 12) & 0x3F)), o += char(0x80 | ((c >> 6) & 0x3F)),
          o += char(0x80 | (c & 0x3F));
    return o;
  }
  // Comments, processing instructions (not "xml"), whitespace: what may surround the root.
  bool misc() {
    if (starts("<!--")) return comment(), true;
    if (starts("<?")) return pi(), true;
    if (!at_end() && is_space(s_[i_])) return skip_space(), true;
    return false;
  }
  void comment() {
    expect("<!--");
    const size_t end = s_.find("--", i_);
    if (end == std::string::npos) fail("unterminated comment");
    if (s_.compare(end, 3, "-->") != 0) fail("\"--\" inside a comment");
    for (; i_ < end; ++i_) check_char(static_cast<unsigned char>(s_[i_]));
    i_ = end + 3;
  }
  void pi() {
    expect("<?");
    const std::string target = name();
    std::string lower = target;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "xml") fail("XML declaration not at the start");
    const size_t end = s_.find("?>", i_);
    if (end == std::string::npos) fail("unterminated processing instruction");
    i_ = end + 2;
  }
  std::unique_ptr<XmlElement> document() {
    if (starts("\xEF\xBB\xBF")) i_ += 3;  // UTF-8 byte order mark
    if (starts("<?xml")) {
      const size_t end = s_.find("?>", i_);
      if (end == std::string::npos) fail("unterminated XML declaration");
      if (s_.compare(i_, 14, "<?xml version=") != 0 && s_.compare(i_, 15, "<?xml  version=") != 0)
        fail("XML declaration without version");
      i_ = end + 2;
    }
    while (misc()) {
    }
    if (starts("<!DOCTYPE")) fail("DOCTYPE is not supported by this checker");
    if (at_end() || s_[i_] != '<') fail("expected the root element");
    auto root = element();
    while (misc()) {
    }
    if (!at_end()) fail("content after the root element");
    return root;
  }
  std::unique_ptr<XmlElement> element() {
    expect("<");
    auto e = std::make_unique<XmlElement>();
    e->name = name();
    for (;;) {
      const bool had_space = !at_end() && is_space(s_[i_]);
      skip_space();
      if (at_end()) fail("unterminated start tag <" + e->name + ">");
      if (starts("/>")) {
        i_ += 2;
        return e;
      }
      if (s_[i_] == '>') {
        ++i_;
        break;
      }
      if (!had_space) fail("attributes must be separated by whitespace");
      const std::string key = name();
      skip_space();
      expect("=");
      skip_space();
      if (at_end() || (s_[i_] != '"' && s_[i_] != '\'')) fail("attribute value not quoted");
      const char q = s_[i_++];
      std::string value;
      for (;;) {
        if (at_end()) fail("unterminated attribute value");
        const char c = s_[i_];
        if (c == q) {
          ++i_;
          break;
        }
        if (c == '<') fail("'<' in an attribute value");
        if (c == '&') {
          ++i_;
          value += reference();
          continue;
        }
        check_char(static_cast<unsigned char>(c));
        value += c;
        ++i_;
      }
      if (!e->attrs.emplace(key, value).second) fail("duplicate attribute " + key);
    }
    // content
    for (;;) {
      if (at_end()) fail("element <" + e->name + "> is not closed");
      if (starts("</")) {
        i_ += 2;
        const std::string closing = name();
        if (closing != e->name) fail("</" + closing + "> closes <" + e->name + ">");
        skip_space();
        expect(">");
        return e;
      }
      if (starts("<!--")) {
        comment();
      } else if (starts("<![CDATA[")) {
        i_ += 9;
        const size_t end = s_.find("]]>", i_);
        if (end == std::string::npos) fail("unterminated CDATA section");
        e->text += s_.substr(i_, end - i_);
        i_ = end + 3;
      } else if (starts("<?")) {
        pi();
      } else if (s_[i_] == '<') {
        e->children.push_back(element());
      } else if (s_[i_] == '&') {
        ++i_;
        e->text += reference();
      } else {
        if (starts("]]>")) fail("\"]]>\" in character data");
        check_char(static_cast<unsigned char>(s_[i_]));
        e->text += s_[i_++];
      }
    }
  }

  const std::string& s_;
  size_t i_ = 0;
};

}  // namespace heed::test
