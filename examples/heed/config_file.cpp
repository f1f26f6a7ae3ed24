#include "config_file.h"

#include <sstream>
#include <toml++/toml.h>

#include "io.h"

namespace heed::cli {

std::vector<ConfigEntry> read_config_file(const std::string& path) {
  const std::string where = "--config " + path + ": ";
  std::string text;
  try {
    const uint64_t size = regular_file_size(path);
    if (size > (1u << 20)) throw UsageError(where + "is " + std::to_string(size) + " bytes; a config file is at most 1 MiB");
    text = read_input_file(path);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(std::string("--config: ") + e.what());
  }
  toml::table doc;
  try {
    doc = toml::parse(text, std::string_view(path));
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << where << "not valid TOML at line " << e.source().begin.line << ", column " << e.source().begin.column
        << ": " << e.description();
    throw UsageError(msg.str());
  }
  std::vector<ConfigEntry> entries;
  for (auto&& [key, node] : doc) {
    ConfigEntry e;
    e.key = std::string(key.str());
    e.line = static_cast<int64_t>(node.source().begin.line);
    if (auto i = node.value_exact<int64_t>()) e.value = *i;
    else if (auto d = node.value_exact<double>()) e.value = *d;
    else if (auto b = node.value_exact<bool>()) e.value = *b;
    else if (auto s = node.value_exact<std::string>()) e.value = *s;
    else
      throw UsageError(where + "line " + std::to_string(e.line) + ": '" + e.key +
                       "' must be a number, true/false or a string (tables, arrays and dates are no options)");
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.line < b.line; });
  return entries;
}

std::string toml_value(const OptionValue& value) {
  if (const auto* s = std::get_if<std::string>(&value)) {
    std::ostringstream out;
    out << toml::value<std::string>(*s);
    return out.str();
  }
  std::string text = format_value(value);
  // A TOML float needs a '.' or an exponent; format_value writes 3.0 as "3".
  if (std::holds_alternative<double>(value) && text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

}  // namespace heed::cli
