#include "train_state.h"

#include <charconv>
#include <cmath>
#include <set>
#include <sstream>

#include "core/autograd.h"
#include "io.h"
#include "nn/dropout.h"
#include "nn/gpt_checkpoint.h"

namespace heed::cli {

using nlohmann::json;

namespace {

// The largest plausible wall time of a run (a century), so a tampered value cannot overflow sums.
constexpr double kMaxElapsed = 3.2e9;

}  // namespace

std::string encode_generator(const Generator& g) {
  json j = json::array();
  for (uint64_t w : g.state()) j.push_back(std::to_string(w));
  return j.dump();
}

// "[s0,s1,s2,s3]", each a decimal string; all zero is the one state xoshiro256** cannot leave.
Generator::State decode_generator(const std::string& text, const std::string& what) {
  const json j = json::parse(text, nullptr, false);
  HEED_CHECK(j.is_array() && j.size() == 4, what, ": a random state must be an array of 4 decimal strings");
  Generator::State s{};
  for (size_t i = 0; i < 4; ++i) {
    HEED_CHECK(j[i].is_string(), what, ": a random state entry must be a decimal string, got ", j[i].dump());
    const std::string d = j[i].get<std::string>();
    const auto r = std::from_chars(d.data(), d.data() + d.size(), s[i]);
    HEED_CHECK(!d.empty() && r.ec == std::errc() && r.ptr == d.data() + d.size(), what, ": bad random state entry ",
               j[i].dump());
  }
  HEED_CHECK(s != Generator::State{}, what, ": a random state of all zeros (the generator would only give zeros)");
  return s;
}

namespace {

void collect_dropouts(nn::Module& m, const std::string& prefix, std::vector<std::pair<std::string, Generator*>>& out) {
  if (auto* d = dynamic_cast<nn::Dropout*>(&m)) out.emplace_back(prefix.empty() ? "." : prefix, &d->generator());
  for (auto& [name, child] : m.children()) collect_dropouts(*child, prefix.empty() ? name : prefix + "." + name, out);
}


// The fields of a log line, each a number where present.
constexpr const char* kLogNumbers[] = {"train_loss", "val_loss", "lr", "elapsed_s"};

// A line of log.jsonl: an object with an integer "iter" whose known fields are numbers (other
// fields, a richer log's, are kept as they are).
bool is_log_line(const json& j) {
  if (!j.is_object() || !j.contains("iter") || !j["iter"].is_number_integer()) return false;
  for (const char* k : kLogNumbers)
    if (j.contains(k) && !j[k].is_number()) return false;
  return true;
}

// The line of an evaluation, as train writes it: every known field present.
bool is_eval_entry(const json& j) {
  if (!is_log_line(j)) return false;
  for (const char* k : kLogNumbers)
    if (!j.contains(k)) return false;
  return true;
}

}  // namespace

std::vector<std::pair<std::string, Generator*>> dropout_generators(nn::Module& model) {
  std::vector<std::pair<std::string, Generator*>> out;
  collect_dropouts(model, "", out);
  return out;
}

int64_t read_state_count(const std::string& text, const char* key, const std::string& what) {
  int64_t v = -1;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  HEED_CHECK(!text.empty() && r.ec == std::errc() && r.ptr == text.data() + text.size(), what, ": \"", key,
             "\" is not an integer: \"", text, "\"");
  HEED_CHECK(v >= 0 && v <= kMaxIters, what, ": \"", key, "\" is ", v, ", outside [0, ", kMaxIters, "]");
  return v;
}

const std::string& state_field(const nn::SafetensorsFile& file, const char* key, const std::string& what,
                               const char* kind) {
  auto it = file.metadata.find(key);
  HEED_CHECK(it != file.metadata.end(), what, ": missing \"", key, "\" in the ", kind);
  return it->second;
}

TrainStateRecord read_train_state(const nn::SafetensorsFile& file, const std::string& what) {
  auto meta = [&](const char* key) -> const std::string& { return state_field(file, key, what, "training state"); };
  TrainStateRecord r;
  r.iter = read_state_count(meta("iter"), "iter", what);
  const int64_t optimizer_step = read_state_count(meta("optimizer_step"), "optimizer_step", what);
  HEED_CHECK(optimizer_step == r.iter, what, ": \"optimizer_step\" ", optimizer_step, " differs from \"iter\" ",
             r.iter, " (heed steps the optimizer once per iteration)");
  const std::string& done = meta("eval_done");
  HEED_CHECK(done == "true" || done == "false", what, ": \"eval_done\" must be true or false, got \"", done, "\"");
  r.eval_done = done == "true";
  r.data_rng = decode_generator(meta("data_rng"), what + ": \"data_rng\"");
  r.dropout_rng = decode_dropout_generators(meta("dropout_rng"), what);
  const json options = json::parse(meta("options"), nullptr, false);
  HEED_CHECK(options.is_object(), what, ": \"options\" is not a JSON object");
  r.options = defaults(train_option_table());
  options_from_json(train_option_table(), r.options, options, {Role::recipe, Role::length}, what + ": \"options\"");
  HEED_CHECK(!r.options.data.empty(), what, ": \"options\": the recorded option \"data\" is empty (no text file)");
  try {
    validate(r.options);
  } catch (const Error& e) {
    detail::fail(what, ": \"options\": ", e.what());
  }
  const json vocab = json::parse(meta("vocab"), nullptr, false);
  HEED_CHECK(vocab.is_string(), what, ": \"vocab\" must be a JSON string");
  r.vocab_utf8 = vocab.get<std::string>();
  const std::string& elapsed = meta("elapsed_s");
  double e = -1;
  const auto er = std::from_chars(elapsed.data(), elapsed.data() + elapsed.size(), e);
  HEED_CHECK(er.ec == std::errc() && er.ptr == elapsed.data() + elapsed.size() && e >= 0 && e <= kMaxElapsed, what,
             ": \"elapsed_s\" must be a number of seconds in [0, ", kMaxElapsed, "], got \"", elapsed, "\"");
  r.elapsed_s = e;
  r.last_eval = json::parse(meta("last_eval"), nullptr, false);
  if (r.last_eval.is_discarded()) detail::fail(what, ": \"last_eval\" is not JSON");
  if (r.eval_done) {
    HEED_CHECK(is_eval_entry(r.last_eval) && r.last_eval["iter"].get<int64_t>() == r.iter, what,
               ": \"last_eval\" must be the log line of the evaluation at iteration ", r.iter, ", got ",
               r.last_eval.dump());
  }
  if (auto it = file.metadata.find("best_val_loss"); it != file.metadata.end()) {
    const std::string& text = it->second;
    double b = -1;
    const auto br = std::from_chars(text.data(), text.data() + text.size(), b);
    HEED_CHECK(br.ec == std::errc() && br.ptr == text.data() + text.size() && std::isfinite(b) && b >= 0, what,
               ": \"best_val_loss\" must be a finite loss, got \"", text, "\"");
    r.best_val_loss = b;
  }
  return r;
}

void restore_train_state(const nn::SafetensorsFile& file, const TrainStateRecord& record, nn::Module& model,
                         optim::Optimizer& optimizer, Generator& data_gen, const std::string& what) {
  std::map<std::string, Tensor> weights;
  optim::NamedTensors moments;
  for (const auto& [name, t] : file.tensors) {
    const bool is_model = name.rfind("model.", 0) == 0, is_optim = name.rfind("optim.", 0) == 0;
    HEED_CHECK(is_model || is_optim, what, ": unexpected tensor '", name, "' (expected model.* and optim.*)");
    const int64_t bad = nn::first_non_finite(t);
    HEED_CHECK(bad < 0, what, ": tensor '", name, "' is not finite (element ", bad, ")");
    if (is_model) {
      weights.emplace(name.substr(6), t);
      continue;
    }
    const std::string key = name.substr(6);
    if (key.size() > 11 && key.compare(key.size() - 11, 11, ".exp_avg_sq") == 0) {
      const Tensor v = t.to(DType::f32).contiguous();
      const float* p = v.data<float>();
      for (int64_t i = 0; i < v.numel(); ++i)
        HEED_CHECK(p[i] >= 0, what, ": tensor '", name, "' holds a negative second moment (element ", i, ")");
    }
    moments.emplace_back(key, t);
  }
  auto params = model.named_parameters();
  for (const auto& [name, p] : params) {
    auto it = weights.find(name);
    HEED_CHECK(it != weights.end(), what, ": missing tensor 'model.", name, "'");
    HEED_CHECK(it->second.shape() == p.shape(), what, ": tensor 'model.", name, "' has shape ",
               to_string(it->second.shape()), ", expected ", to_string(p.shape()));
  }
  HEED_CHECK(weights.size() == params.size(), what, ": ", weights.size() - params.size(),
             " 'model.' tensors that are no parameter of the model");
  // Every parameter of heed's models (GPT, the encoder-decoder) takes part in every step's loss,
  // so after a step each has its moments and before the first none has. The optimizer alone
  // takes a parameter without them for one not stepped yet and starts its moments from zero: a
  // state stripped of its moments resumed silently as another run (fuzz_seq2seq_state and
  // fuzz_train_state check restored runs for it).
  std::set<std::string> moment_names;
  for (const auto& [key, t] : moments) moment_names.insert(key);
  for (const auto& [name, p] : params)
    HEED_CHECK(moment_names.count(name + ".exp_avg") == (record.iter > 0 ? 1u : 0u), what, ": ",
               record.iter > 0 ? "missing tensor 'optim." : "unexpected tensor 'optim.", name, ".exp_avg' at iteration ",
               record.iter, " (every parameter has its moments after the first step, none before)");
  auto gens = dropout_generators(model);
  for (const auto& [path, g] : gens)
    HEED_CHECK(record.dropout_rng.count(path), what, ": no random state for dropout '", path, "'");
  HEED_CHECK(record.dropout_rng.size() == gens.size(), what, ": \"dropout_rng\" has ", record.dropout_rng.size(),
             " entries for the model's ", gens.size(), " dropout modules");
  try {
    optimizer.load_state(moments, record.iter);  // checks names and shapes; changes nothing if it throws
  } catch (const Error& e) {
    detail::fail(what, ": ", e.what());
  }
  // Everything is checked: commit.
  NoGradGuard no_grad;
  for (auto& [name, p] : params) p.copy_(weights.at(name));
  data_gen.set_state(record.data_rng);
  for (auto& [path, g] : gens) g->set_state(record.dropout_rng.at(path));
}

std::string encode_dropout_generators(nn::Module& model) {
  json gens = json::object();
  for (auto& [p, g] : dropout_generators(model)) gens[p] = encode_generator(*g);
  return gens.dump();
}

std::map<std::string, Generator::State> decode_dropout_generators(const std::string& text, const std::string& what) {
  const json gens = json::parse(text, nullptr, false);
  HEED_CHECK(gens.is_object(), what, ": \"dropout_rng\" must be a JSON object of random states");
  std::map<std::string, Generator::State> out;
  for (auto& [path, g] : gens.items()) {
    HEED_CHECK(g.is_string(), what, ": \"dropout_rng\" entry '", path, "' must be a string");
    out[path] = decode_generator(g.get<std::string>(), what + ": \"dropout_rng\" entry '" + path + "'");
  }
  return out;
}

std::vector<std::pair<std::string, Tensor>> training_tensors(nn::Module& model, const optim::Optimizer& optimizer) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [name, t] : model.named_parameters()) tensors.emplace_back("model." + name, t);
  for (auto& [name, t] : optimizer.state_tensors()) tensors.emplace_back("optim." + name, t);
  return tensors;
}

void save_train_state(const std::string& path, nn::Module& model, const optim::Optimizer& optimizer,
                      const Generator& data_gen, const TrainStateRecord& record) {
  const auto tensors = training_tensors(model, optimizer);
  std::ostringstream elapsed;
  elapsed.precision(17);
  elapsed << record.elapsed_s;
  std::map<std::string, std::string> meta{
      {"iter", std::to_string(record.iter)},
      {"eval_done", record.eval_done ? "true" : "false"},
      {"optimizer_step", std::to_string(optimizer.step_count())},
      {"data_rng", encode_generator(data_gen)},
      {"dropout_rng", encode_dropout_generators(model)},
      {"options", options_to_json(train_option_table(), record.options, {Role::recipe, Role::length}).dump()},
      {"vocab", json(record.vocab_utf8).dump()},
      {"elapsed_s", elapsed.str()},
      {"last_eval", record.last_eval.dump()}};
  if (std::isfinite(record.best_val_loss)) {
    std::ostringstream best;
    best.precision(17);
    best << record.best_val_loss;
    meta["best_val_loss"] = best.str();
  }
  nn::save_safetensors(path, tensors, meta);
}

void truncate_log(const std::string& path, int64_t iter) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return;
  const std::string text = read_input_file(path, 3.0);
  std::string kept;
  size_t start = 0;
  int64_t lineno = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    const bool complete = end != std::string::npos;
    if (!complete) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++lineno;
    if (line.empty()) continue;
    const json j = json::parse(line, nullptr, false);
    if (!is_log_line(j)) {
      if (!complete) break;  // the last line, cut short by a crash while it was written
      detail::fail(path, ": line ", lineno, " is not a log entry (an object with an integer \"iter\" and numbers "
                   "for \"train_loss\", \"val_loss\", \"lr\", \"elapsed_s\")");
    }
    if (j["iter"].get<int64_t>() < iter) kept += line + "\n";
  }
  write_file_atomically(path, kept);
}

}  // namespace heed::cli
