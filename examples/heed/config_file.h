// config.toml: a run's options as a TOML file (https://toml.io), written by `heed train` into its
// run directory and read back by `heed train --config FILE`. One `name = value` line per option
// under nanoGPT's names (n_layer = 4), each after a comment with its help; the flag spellings
// (n-layer) and the table's aliases are accepted when reading too. Reading and writing go through
// tomlplusplus, so every string (a path holding '#', '"', a backslash or a newline) round-trips.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "commands.h"
#include "options.h"

namespace heed::cli {

/// One `key = value` of a config file.
struct ConfigEntry {
  std::string key;
  OptionValue value;  ///< a TOML integer, float, boolean or string
  int64_t line = 0;
};

/// Reads a config file. Throws UsageError "--config PATH: ..." for a file that cannot be read (it
/// must be a regular file of at most 1 MiB), a TOML syntax error (naming its line and column), and
/// a value that is a table, an array, a date or a time.
std::vector<ConfigEntry> read_config_file(const std::string& path);

/// `value` as TOML: strings quoted and escaped by tomlplusplus, doubles in their shortest exact form.
std::string toml_value(const OptionValue& value);

/// config.toml's text for `o`: `header` as comment lines, then for each option its help as a
/// comment and `name = value`.
template <class T>
std::string config_toml(const OptionTable<T>& table, const T& o, const std::string& header) {
  std::string text;
  size_t start = 0;
  while (start < header.size()) {
    const size_t nl = header.find('\n', start);
    text += "# " + header.substr(start, nl == std::string::npos ? std::string::npos : nl - start) + "\n";
    start = nl == std::string::npos ? header.size() : nl + 1;
  }
  for (const auto& opt : table) text += "\n# " + opt.help + "\n" + opt.name + " = " + toml_value(opt.get(o)) + "\n";
  return text;
}

/// Sets the options of `entries` in `o`, except those named in `from_command_line` (flags given on
/// the command line win); adds each one it sets to `from_config`. A relative path is taken
/// relative to the file's directory. Throws UsageError naming the file, the line and the key for a
/// key that is no option of `command`, a key repeating an option, or a value of the wrong type.
template <class T>
void apply_config(const OptionTable<T>& table, const std::vector<ConfigEntry>& entries, const std::string& path,
                  const std::string& command, const std::set<std::string>& from_command_line, T& o,
                  std::set<std::string>& from_config) {
  std::map<std::string, const ConfigEntry*> seen;  // option name -> its entry
  for (const ConfigEntry& e : entries) {
    const std::string where = "--config " + path + ": line " + std::to_string(e.line) + ": ";
    const Option<T>* opt = find_option(table, e.key);
    if (opt == nullptr) throw UsageError(where + "'" + e.key + "' is not an option of " + command);
    if (auto [it, fresh] = seen.emplace(opt->name, &e); !fresh)
      throw UsageError(where + "'" + e.key + "' sets the same option as '" + it->second->key + "' on line " +
                       std::to_string(it->second->line));
    OptionValue v = e.value;
    const OptionValue& like = opt->default_value;
    const bool fits = v.index() == like.index() ||
                      (std::holds_alternative<double>(like) && std::holds_alternative<int64_t>(v));
    if (!fits) {
      static const char* kinds[] = {"an integer", "a number", "true or false", "a string"};
      throw UsageError(where + "'" + e.key + "' must be " + kinds[like.index()] + ", not " + kinds[v.index()]);
    }
    if (from_command_line.count(opt->name)) continue;
    if (opt->is_path) {
      const std::string& p = std::get<std::string>(v);
      if (!p.empty() && std::filesystem::path(p).is_relative())
        v = (std::filesystem::path(path).parent_path() / p).lexically_normal().string();
    }
    opt->set(o, v);
    from_config.insert(opt->name);
  }
}

}  // namespace heed::cli
