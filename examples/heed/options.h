// The one definition of every option of a heed subcommand: its flag, nanoGPT's name for it, its
// type (the member of the options struct it sets), its default, its range and its help, in one
// table per subcommand (train_options.h, seq2seq.h, commands.h). Everything that handles an option
// reads that table:
//   - main.cpp registers the CLI11 flags from it (`--n-layer`, and nanoGPT's `--n_layer` as an alias);
//   - check_ranges() validates the values (a usage error naming the flag);
//   - config_file.h writes and reads config.toml with it (keys: nanoGPT's names; the flag
//     spellings and aliases are accepted too);
//   - options_to_json() / options_from_json() record a run's recipe in its checkpoint, and
//     --resume compares the flags given against it.
// Adding an option is one row in its table plus the code that uses the member.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace heed::cli {

/// What a run's record does with an option.
enum class Role {
  recipe,  ///< saved in the training state; --resume refuses another value
  length,  ///< saved; --resume keeps it unless the flag is given again (--max-iters)
  local,   ///< how this process runs (threads, output): recorded in config.toml only
};

/// The values an option may take: [min, max] for numbers (`min_open`/`max_open` exclude the end).
/// Doubles must also be finite. Strings and booleans have no range.
struct Range {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false, max_open = false;
};

/// An option's value, in the type of its member.
using OptionValue = std::variant<int64_t, double, bool, std::string>;

/// One option of the options struct `T`.
template <class T>
struct Option {
  std::string flag;                  ///< "n-layer": the command line's --n-layer
  std::string name;                  ///< "n_layer": nanoGPT's name; the key in config.toml and checkpoints
  std::vector<std::string> aliases;  ///< more accepted names ("learning_rate"), flags and keys alike
  std::variant<int64_t T::*, double T::*, bool T::*, std::string T::*> member;
  OptionValue default_value;
  Range range;
  std::string help;
  Role role = Role::recipe;
  bool is_path = false;   ///< a file or directory: made absolute when recorded; in a config file,
                          ///< relative to the file's directory
  bool required = false;  ///< the command cannot run without it

  /// Every spelling: the flag, the name and the aliases.
  std::vector<std::string> spellings() const {
    std::vector<std::string> s{flag};
    if (name != flag) s.push_back(name);
    s.insert(s.end(), aliases.begin(), aliases.end());
    return s;
  }
  OptionValue get(const T& o) const {
    return std::visit([&](auto m) -> OptionValue { return o.*m; }, member);
  }
  /// Sets the member; the value's type must be the member's (an int64 also sets a double).
  void set(T& o, const OptionValue& v) const;
};

template <class T>
using OptionTable = std::vector<Option<T>>;

/// The options struct with every member at its table default.
template <class T>
T defaults(const OptionTable<T>& table) {
  T o{};
  for (const auto& opt : table) opt.set(o, opt.default_value);
  return o;
}

/// The row whose flag, name or alias is `spelling` (without dashes), or nullptr.
template <class T>
const Option<T>* find_option(const OptionTable<T>& table, const std::string& spelling) {
  for (const auto& opt : table)
    for (const auto& s : opt.spellings())
      if (s == spelling) return &opt;
  return nullptr;
}

/// A value as the command line would write it: 0.001, 1e-05 (shortest round-trip form), true, text.
std::string format_value(const OptionValue& v);

/// "--n-layer 0: must be at least 1" and the like (a UsageError naming the flag) for the first
/// value outside its range; non-finite doubles are refused too.
void check_range(const std::string& flag, const OptionValue& v, const Range& r);
template <class T>
void check_ranges(const OptionTable<T>& table, const T& o) {
  for (const auto& opt : table) check_range(opt.flag, opt.get(o), opt.range);
}

/// The value of `j` as the type of `like`, or nothing if it has another type (an integer is also
/// a double; an int64 also accepts a decimal string, as older checkpoints wrote the seed).
std::optional<OptionValue> value_from_json(const nlohmann::json& j, const OptionValue& like);
nlohmann::json value_to_json(const OptionValue& v);
/// Throws heed::Error "<what>: <message>" (the non-template half of options_from_json).
[[noreturn]] void fail_record(const std::string& what, const std::string& message);

/// The options of `roles` as a JSON object keyed by name (a checkpoint's record of its recipe).
template <class T>
nlohmann::json options_to_json(const OptionTable<T>& table, const T& o, const std::set<Role>& roles) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& opt : table)
    if (roles.count(opt.role)) j[opt.name] = value_to_json(opt.get(o));
  return j;
}

/// Reads the options of `roles` from the JSON object `j` into `o`. A key the table does not know
/// (or of another role), a value of the wrong type or out of range is a heed::Error naming `what`
/// and the key; so is an option of `roles` missing from `j` (a default in its place would change the
/// recipe silently).
template <class T>
void options_from_json(const OptionTable<T>& table, T& o, const nlohmann::json& j, const std::set<Role>& roles,
                       const std::string& what) {
  if (!j.is_object()) fail_record(what, "the recorded options are not a JSON object");
  for (const auto& [key, value] : j.items()) {
    const Option<T>* opt = nullptr;
    for (const auto& row : table)
      if (row.name == key && roles.count(row.role)) opt = &row;
    if (opt == nullptr) fail_record(what, "unknown recorded option \"" + key + "\"");
    const std::optional<OptionValue> v = value_from_json(value, opt->default_value);
    if (!v) fail_record(what, "recorded option \"" + key + "\" has the wrong type (" + value.dump() + ")");
    try {
      check_range(opt->flag, *v, opt->range);
    } catch (const std::exception& e) {
      fail_record(what, std::string("recorded option \"") + key + "\": " + e.what());
    }
    opt->set(o, *v);
  }
  for (const auto& row : table)
    if (roles.count(row.role) && !j.contains(row.name))
      fail_record(what, "the recorded option \"" + row.name + "\" is missing");
}

template <class T>
void Option<T>::set(T& o, const OptionValue& v) const {
  std::visit(
      [&](auto m) {
        using M = std::remove_reference_t<decltype(o.*m)>;
        if constexpr (std::is_same_v<M, double>) {
          if (const int64_t* i = std::get_if<int64_t>(&v)) {
            o.*m = static_cast<double>(*i);
            return;
          }
        }
        o.*m = std::get<M>(v);
      },
      member);
}

}  // namespace heed::cli
