#include "options.h"

#include <charconv>
#include <cmath>

#include "commands.h"

namespace heed::cli {

namespace {

// The shortest text that reads back as the same double ("0.001", "1e-05", "3").
std::string shortest(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string bound_text(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return shortest(v);
}

}  // namespace

std::string format_value(const OptionValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) return shortest(*d);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  return std::get<std::string>(v);
}

void check_range(const std::string& flag, const OptionValue& v, const Range& r) {
  double x;
  if (const auto* i = std::get_if<int64_t>(&v)) x = static_cast<double>(*i);
  else if (const auto* d = std::get_if<double>(&v)) x = *d;
  else return;  // strings and booleans have no range
  const std::string shown = "--" + flag + " " + format_value(v) + ": ";
  if (std::holds_alternative<double>(v) && !std::isfinite(x)) throw UsageError(shown + "must be a finite number");
  const bool low = r.min_open ? !(x > r.min) : !(x >= r.min);
  const bool high = r.max_open ? !(x < r.max) : !(x <= r.max);
  if (!low && !high) return;
  // The message says the range as simply as it can.
  if (std::isinf(r.max)) {
    if (r.min == 0 && r.min_open) throw UsageError(shown + "must be positive");
    if (r.min == 0) throw UsageError(shown + "must not be negative");
    throw UsageError(shown + "must be " + (r.min_open ? "greater than " : "at least ") + bound_text(r.min));
  }
  throw UsageError(shown + "must be in " + (r.min_open ? "(" : "[") + bound_text(r.min) + ", " + bound_text(r.max) +
                   (r.max_open ? ")" : "]"));
}

std::optional<OptionValue> value_from_json(const nlohmann::json& j, const OptionValue& like) {
  if (std::holds_alternative<int64_t>(like)) {
    if (j.is_number_integer()) {
      if (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) return {};
      return OptionValue(j.get<int64_t>());
    }
    if (j.is_string()) {  // older checkpoints wrote the seed as a decimal string
      const std::string s = j.get<std::string>();
      int64_t v = 0;
      const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
      if (r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty()) return OptionValue(v);
    }
    return {};
  }
  if (std::holds_alternative<double>(like)) {
    if (j.is_number()) return OptionValue(j.get<double>());
    return {};
  }
  if (std::holds_alternative<bool>(like)) {
    if (j.is_boolean()) return OptionValue(j.get<bool>());
    return {};
  }
  if (j.is_string()) return OptionValue(j.get<std::string>());
  return {};
}

nlohmann::json value_to_json(const OptionValue& v) {
  return std::visit([](const auto& x) { return nlohmann::json(x); }, v);
}

void fail_record(const std::string& what, const std::string& message) { throw Error(what + ": " + message); }

}  // namespace heed::cli
