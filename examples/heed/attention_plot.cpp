// `heed attention`: draws what a model attends to. For a GPT checkpoint, the causal self-attention
// weights of every layer and head over TEXT; for a seq2seq checkpoint, the decoder's
// cross-attention (output characters against source characters) while it decodes TEXT greedily.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "commands.h"
#include "core/autograd.h"
#include "core/ops.h"
#include "corpus.h"
#include "nn/gpt_checkpoint.h"
#include "io.h"
#include "resources.h"
#include "seq2seq.h"
#include "seq2seq_checkpoint.h"
#include "stop.h"
#include "svg.h"

namespace heed::cli {

namespace {

// Every MultiHeadAttention in the tree, with its dotted path, in registration order.
void find_attention(nn::Module& m, const std::string& path,
                           std::vector<std::pair<std::string, nn::MultiHeadAttention*>>& out) {
  if (auto* a = dynamic_cast<nn::MultiHeadAttention*>(&m)) out.emplace_back(path, a);
  for (auto& [name, child] : m.children()) find_attention(*child, path.empty() ? name : path + "." + name, out);
}

std::string shown(char32_t c) {
  if (c == U'\n') return "\\n";
  if (c == U' ') return "\u2423";  // open box: a visible space
  return encode_utf8(c);
}

// One heatmap per head from weights (1, nh, Tq, Tk).
void add_heads(std::vector<Heatmap>& maps, const std::string& title, const Tensor& w,
                      const std::vector<std::string>& rows, const std::vector<std::string>& cols) {
  const int64_t nh = w.size(1), Tq = w.size(2), Tk = w.size(3);
  const std::vector<double> v = w.to_vector<double>();
  for (int64_t h = 0; h < nh; ++h) {
    Heatmap m;
    m.title = title + ", head " + std::to_string(h);
    m.row_labels = rows;
    m.col_labels = cols;
    m.values.assign(v.begin() + h * Tq * Tk, v.begin() + (h + 1) * Tq * Tk);
    maps.push_back(std::move(m));
  }
}

// What an SVG of `cells` heatmap cells takes (each a <rect> with its <title>, about 150 bytes), and
// the most one drawing may hold: beyond that no viewer opens it.
constexpr double kBytesPerCell = 150;
constexpr double kMaxSvgBytes = 256.0 * (1 << 20);

void check_drawing_size(double cells, const std::string& what) {
  if (cells * kBytesPerCell > kMaxSvgBytes)
    throw UsageError(what + " would draw " + format_value(cells) + " heatmap cells, an SVG of about " +
                     format_bytes(cells * kBytesPerCell) + " (at most " + format_bytes(kMaxSvgBytes) +
                     "); give a shorter --text");
  require_memory(3 * cells * kBytesPerCell, what + " drawing " + format_value(cells) + " cells", true);
}

}  // namespace

int run_attention(const std::string& checkpoint, const std::string& text, const std::string& out) {
  if (checkpoint.empty()) throw UsageError("--checkpoint is required");
  if (text.empty()) throw UsageError("--text must not be empty");
  if (out.empty()) throw UsageError("--out is required");
  if (same_file(checkpoint, out)) throw UsageError("--out " + out + " is the --checkpoint; it would be overwritten");
  require_own_output(out, "--out", kSvgSignature);
  // Nothing is written before the drawing: until then a stop ends heed at once, even inside the
  // library's parsing and copying of a large checkpoint, which never polls it.
  std::optional<ExitAtOnceOnStop> only_reading(std::in_place);
  const std::string bytes = read_input_file(checkpoint, 4.0);
  nn::SafetensorsFile file =
      nn::parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), checkpoint);
  NoGradGuard no_grad;
  std::vector<Heatmap> maps;
  std::string title;
  int columns = 4;
  if (file.metadata.count("seq2seq")) {
    Seq2SeqOptions o;
    auto model = load_seq2seq(file, checkpoint, o);
    for (char c : text)
      if (c < 32 || c > 126) throw Error("--text: the seq2seq model reads printable ASCII only");
    if (static_cast<int64_t>(text.size()) > kSeq2SeqMaxLen) throw UsageError("--text: longer than the model's maximum length");
    check_drawing_size(double(o.n_layer) * double(o.n_head) * double(kSeq2SeqMaxLen) * double(text.size()),
                       checkpoint + " (" + std::to_string(o.n_layer) + " decoder layers x " +
                           std::to_string(o.n_head) + " heads)");
    const std::string decoded = greedy_decode(*model, {text}, kSeq2SeqMaxLen - 1)[0];
    // Decode once more over the whole output, keeping the cross-attention weights.
    std::vector<std::pair<std::string, nn::MultiHeadAttention*>> attns;
    find_attention(*model, "", attns);
    std::vector<std::pair<std::string, nn::MultiHeadAttention*>> cross;
    for (auto& a : attns)
      if (a.first.find("cross") != std::string::npos) cross.push_back(a);
    HEED_CHECK(!cross.empty(), checkpoint, ": no cross-attention modules found");
    for (auto& [_, a] : cross) a->set_keep_attention(true);
    Seq2SeqBatch b = make_batch({{text, decoded}});
    Tensor memory = model->encode(b.src, 1, b.Ts, &b.src_mask);
    model->decode(b.tgt_in, 1, b.Tt, memory, nullptr, &b.src_mask);
    std::vector<std::string> rows, cols;
    for (char c : decoded) rows.push_back(std::string(1, c));
    rows.push_back("<eos>");  // row i is the step that produced output i
    for (char c : text) cols.push_back(shown(static_cast<unsigned char>(c)));
    for (auto& [path, a] : cross) add_heads(maps, path, a->last_attention(), rows, cols);
    title = "cross-attention: \"" + text + "\" -> \"" + decoded + "\" (rows: output, columns: source)";
    columns = static_cast<int>(std::min<int64_t>(4, o.n_head));
  } else {
    nn::LoadedGPT loaded = nn::load_gpt_checkpoint_from_bytes(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                              bytes.size(), checkpoint);
    const Vocab vocab(decode_utf8(loaded.vocab_utf8, checkpoint + ": metadata \"vocab\""));
    std::u32string chars = decode_utf8(text, "--text");
    const int64_t block = loaded.model->config().block_size;
    if (static_cast<int64_t>(chars.size()) > block) chars = chars.substr(chars.size() - block);  // as sampling crops
    const std::vector<int32_t> ids = vocab.encode(chars, "--text");
    const nn::GPTConfig& c = loaded.model->config();
    const double T = double(ids.size());
    check_drawing_size(double(c.n_layer) * double(c.n_head) * T * T,
                       "--text of " + std::to_string(ids.size()) + " characters over " + checkpoint + " (" +
                           std::to_string(c.n_layer) + " layers x " + std::to_string(c.n_head) + " heads)");
    std::vector<std::pair<std::string, nn::MultiHeadAttention*>> attns;
    find_attention(*loaded.model, "", attns);
    for (auto& [_, a] : attns) a->set_keep_attention(true);
    loaded.model->eval();
    loaded.model->forward(ids, 1, static_cast<int64_t>(ids.size()));
    std::vector<std::string> labels;
    for (char32_t c : chars) labels.push_back(shown(c));
    for (auto& [path, a] : attns) add_heads(maps, path, a->last_attention(), labels, labels);
    title = "causal self-attention over \"" + text + "\" (rows: queries, columns: keys)";
    columns = static_cast<int>(loaded.model->config().n_head);
  }
  only_reading.reset();
  write_file_atomically(out, heatmaps_svg(title, maps, columns));
  write_stdout("wrote " + out + " (" + std::to_string(maps.size()) + " heatmaps)\n");
  return 0;
}

}  // namespace heed::cli
