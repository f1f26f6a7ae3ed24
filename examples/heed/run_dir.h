// A run directory belongs to one run. `heed train --out DIR` and `heed seq2seq --out DIR`:
//   - lock DIR for their whole lifetime (flock(2) on DIR/.heed.lock, which names the holder): a
//     second writer is refused with a message naming the first; the kernel drops the lock when
//     its process dies, however it dies, so a killed run never blocks the next one;
//   - refuse a DIR that already holds a run, unless --resume (continue it: `train` only) or
//     --overwrite (start over: the old run's files are removed before the new run writes, once
//     everything that can refuse it, such as its corpus, has been checked) says what to do;
//   - never touch a run of the other kind (a GPT run and a seq2seq run), whatever the flags, nor a
//     file heed did not write at one of a run's paths (a user's own config.toml, say);
//   - leave DIR as it was found when the command is refused before it writes a run: the
//     directories and the lock file it created go again.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace heed::cli {

/// The files of a run in a directory.
std::string model_path(const std::string& dir);
std::string state_path(const std::string& dir);
std::string log_path(const std::string& dir);
std::string config_path(const std::string& dir);
std::string plot_path(const std::string& dir);
/// The checkpoint of the lowest val loss (`heed train --keep-best`).
std::string best_model_path(const std::string& dir);
/// Every file a run writes into its directory (the ones above), for "is this one of them" checks.
std::vector<std::string> run_files(const std::string& dir);
/// The first line of the config.toml heed train writes, after "# ": what marks that file as heed's.
inline constexpr const char* kRunConfigTitle = "The options of the heed train run in this directory (written by heed).";

/// What a directory holds.
enum class RunKind { none, gpt, seq2seq, unknown };
/// "a GPT run (heed train)", "a seq2seq run (heed seq2seq)", "files of a run".
std::string describe(RunKind kind);
/// Looks at the run files in `dir` (only the header of model.safetensors is read).
RunKind run_kind(const std::string& dir);

/// What a command asks of its --out directory.
enum class OutMode {
  fresh,      ///< start a run; the directory must not hold one
  resume,     ///< continue the run there (it must be of this command's kind)
  overwrite,  ///< start over, removing the run there (only a run of this command's kind)
};

/// Holds DIR's lock while alive.
class RunDirectory {
 public:
  /// Creates `dir` if needed, checks files can be created in it, takes its lock (heed::Error naming
  /// the holder if another process has it), then applies `mode` for a run of `kind` (UsageError
  /// naming --out and what the directory holds) and removes the temporary files a killed run left.
  /// `command` ("heed train") goes into the lock file.
  RunDirectory(const std::string& dir, RunKind kind, OutMode mode, const std::string& command);
  ~RunDirectory();
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;

  const std::string& path() const { return dir_; }
  /// What the directory held when it was opened.
  RunKind found() const { return found_; }
  /// The command calls it after everything that can still refuse the new run (its corpus, its
  /// memory) and before its first write. With --overwrite it removes the old run's files now, so
  /// a refused --overwrite leaves the old run as it was. Until it is called, an end of the command
  /// (a refusal, a stop) removes the lock file and the directories this made.
  void begin_writing();

 private:
  void apply_mode(RunKind kind, OutMode mode, const std::string& command);
  void release();  // unlocks; removes the lock file and directories this made if no run was written
  std::string dir_;
  std::string lock_file_;
  std::vector<std::string> created_dirs_;  // made by this, deepest first
  bool created_lock_ = false;
  bool writing_ = false;
  OutMode mode_ = OutMode::fresh;
  int lock_fd_ = -1;
  RunKind found_ = RunKind::none;
};

}  // namespace heed::cli
