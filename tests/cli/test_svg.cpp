// The SVG pictures: `heed attention` (GPT self-attention per layer and head; seq2seq
// cross-attention) and `heed plot` write well-formed XML (parsed by tests/support/xml.h) with the
// expected heatmaps, cells, labels and curves; the well-formedness checker itself rejects
// malformed documents.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "core/heed.h"
#include "nn/gpt.h"
#include "nn/gpt_checkpoint.h"
#include "seq2seq.h"
#include "seq2seq_checkpoint.h"
#include "support/process.h"
#include "support/xml.h"
#include "svg.h"

using namespace heed;
using namespace heed::cli;
using namespace heed::test;

namespace {

std::unique_ptr<XmlElement> parse_svg(const std::string& text) {
  std::unique_ptr<XmlElement> root;
  try {
    root = XmlParser::parse(text);
  } catch (const XmlError& e) {
    FAIL(e.what());
  }
  REQUIRE(root->name == "svg");
  REQUIRE(root->attr("xmlns") == "http://www.w3.org/2000/svg");
  return root;
}

// One heatmap panel read back: its title, column and row labels, and the weights of its cells
// (from each cell's tooltip "row -> col: 0.123").
struct Panel {
  std::string title;
  std::vector<std::string> col_labels, row_labels;
  std::vector<std::vector<double>> weights;  // [row][col]
};

std::vector<Panel> panels(const XmlElement& svg) {
  std::vector<Panel> out;
  for (const XmlElement* g : svg.elements("g", "heatmap")) {
    Panel p;
    std::vector<const XmlElement*> texts;
    for (const auto& c : g->children)
      if (c->name == "text") texts.push_back(c.get());
    REQUIRE(!texts.empty());
    p.title = texts[0]->text;
    for (size_t i = 1; i < texts.size(); ++i)  // column labels are centred, row labels end-aligned
      (texts[i]->attr("text-anchor") == "end" ? p.row_labels : p.col_labels).push_back(texts[i]->text);
    for (const auto& c : g->children) {
      if (c->name != "rect" || c->children.empty()) continue;  // the frame has no tooltip
      const std::string tip = c->children.at(0)->text;
      const size_t colon = tip.rfind(": ");
      REQUIRE(colon != std::string::npos);
      const size_t row = p.weights.empty() || p.weights.back().size() == p.col_labels.size() ? p.weights.size() : p.weights.size() - 1;
      if (row == p.weights.size()) p.weights.emplace_back();
      p.weights[row].push_back(std::stod(tip.substr(colon + 2)));
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

TEST_CASE("the XML checker accepts well-formed documents and rejects malformed ones", "[svg]") {
  const std::string good =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- c -->\n<svg a=\"1\" b='&lt;&amp;&#65;&#x42;'>"
      "<g><text>x &gt; y</text><rect/></g><![CDATA[<raw>]]></svg>\n";
  auto root = XmlParser::parse(good);
  CHECK(root->attr("b") == "<&AB");
  CHECK(root->elements("text").at(0)->text == "x > y");
  CHECK(root->text == "<raw>");
  for (const char* bad : {"", "<svg>", "<svg></g>", "<svg><g></svg></g>", "<svg a=1/>", "<svg a=\"1\" a=\"2\"/>",
                          "<svg a=\"<\"/>", "<svg>&</svg>", "<svg>&nbsp;</svg>", "<svg>&#0;</svg>", "<svg/><svg/>",
                          "<svg/>text", "<svg>\x01</svg>", "<svg><!-- a -- b --></svg>", "<svg a=\"1\"b=\"2\"/>",
                          "<1svg/>", "<svg>]]></svg>", "text<svg/>", "<svg/><?xml version=\"1.0\"?>"}) {
    INFO("document: " << bad);
    CHECK_THROWS_AS(XmlParser::parse(bad), XmlError);
  }
}

TEST_CASE("heatmaps_svg: one group per map, a cell per weight, labels escaped, a colour scale", "[svg]") {
  std::vector<Heatmap> maps;
  for (int k = 0; k < 3; ++k)
    maps.push_back({"map <" + std::to_string(k) + ">", {"<", "&"}, {"\"", "'", "a"}, {0, 0.5, 1, 0.25, 0.25, 0.5}});
  auto root = parse_svg(heatmaps_svg("title & \"quotes\"", maps, 2));
  CHECK(root->children.size() > 3);
  const auto ps = panels(*root);
  REQUIRE(ps.size() == 3);
  for (int k = 0; k < 3; ++k) {
    CHECK(ps[k].title == "map <" + std::to_string(k) + ">");
    CHECK(ps[k].row_labels == std::vector<std::string>{"<", "&"});
    CHECK(ps[k].col_labels == std::vector<std::string>{"\"", "'", "a"});
    REQUIRE(ps[k].weights.size() == 2);
    CHECK(ps[k].weights[0] == std::vector<double>{0, 0.5, 1});
    CHECK(ps[k].weights[1] == std::vector<double>{0.25, 0.25, 0.5});
  }
  CHECK(root->elements("g", "colorbar").size() == 1);
  CHECK(root->all_text().find("title & \"quotes\"") != std::string::npos);
  CHECK_THROWS_AS(heatmaps_svg("t", {{"bad", {"a"}, {"b"}, {0.1, 0.2}}}, 1), Error);
}

TEST_CASE("line_chart_svg: a polyline per curve, legend labels, escaped title", "[svg]") {
  std::vector<Curve> curves = {{"a <train>", {0, 1, 2}, {3, 2, 1}, false}, {"a val", {0, 1, 2}, {3.5, 2.5, NAN}, true}};
  auto root = parse_svg(line_chart_svg("loss & more", "iteration", "nats", curves));
  const auto lines = root->elements("polyline", "curve");
  REQUIRE(lines.size() == 2);
  CHECK(lines[1]->attr("stroke-dasharray") != "");
  // the NaN point is left out: two points in the second curve
  std::istringstream pts(lines[1]->attr("points"));
  int n = 0;
  for (std::string p; pts >> p;) ++n;
  CHECK(n == 2);
  const std::string text = root->all_text();
  for (const char* want : {"a <train>", "a val", "loss & more", "iteration", "nats"}) CHECK(text.find(want) != std::string::npos);
}

TEST_CASE("heed attention on a GPT checkpoint: n_layer * n_head causal heatmaps over the characters", "[svg][cli]") {
  ScratchDir dir("attn-gpt");
  nn::GPTConfig cfg;
  cfg.vocab_size = 6, cfg.block_size = 16, cfg.n_layer = 3, cfg.n_head = 2, cfg.n_embd = 8;
  nn::GPT model(cfg, 5);
  nn::save_gpt_checkpoint(dir / "model.safetensors", model, "\n abc<");
  const std::string text = "ab <c\nba";
  ProcessResult r = run_heed({"attention", "--checkpoint", dir / "model.safetensors", "--text", text, "--out", dir / "a.svg"});
  require_ok(r);
  auto root = parse_svg(read_file(dir / "a.svg"));
  const auto ps = panels(*root);
  REQUIRE(ps.size() == 6);  // n_layer * n_head
  const std::vector<std::string> labels = {"a", "b", "\u2423", "<", "c", "\\n", "b", "a"};
  for (const auto& p : ps) {
    INFO(p.title);
    CHECK(p.col_labels == labels);
    CHECK(p.row_labels == labels);
    REQUIRE(p.weights.size() == labels.size());
    for (size_t i = 0; i < p.weights.size(); ++i) {
      REQUIRE(p.weights[i].size() == labels.size());
      double sum = 0;
      for (size_t j = 0; j < labels.size(); ++j) {
        if (j > i) CHECK(p.weights[i][j] == 0.0);  // causal: no key after the query
        sum += p.weights[i][j];
      }
      CHECK(sum == Approx(1.0).margin(0.01));  // tooltips round to 3 decimals
    }
  }
  CHECK(ps[0].title.find("h.0") != std::string::npos);
  CHECK(ps[5].title.find("h.2") != std::string::npos);
  CHECK(root->elements("g", "colorbar").size() == 1);
  // a character outside the vocabulary is an error naming it
  require_clean_error(run_heed({"attention", "--checkpoint", dir / "model.safetensors", "--text", "xyz", "--out", dir / "b.svg"}),
                      1, {"--text"});
}

TEST_CASE("heed attention on a seq2seq checkpoint: cross-attention, source by output, per layer and head", "[svg][cli]") {
  ScratchDir dir("attn-s2s");
  Seq2SeqOptions o = defaults(seq2seq_option_table());
  o.task = "dates", o.d_model = 16, o.n_head = 2, o.n_layer = 2, o.seed = 3;
  nn::EncoderDecoder model(seq2seq_model_options(o));
  model.eval();
  save_seq2seq(dir / "model.safetensors", model, o);
  const std::string text = "Nov 22, 2026";
  const std::string decoded = greedy_decode(model, {text}, kSeq2SeqMaxLen - 1)[0];
  ProcessResult r = run_heed({"attention", "--checkpoint", dir / "model.safetensors", "--text", text, "--out", dir / "a.svg"});
  require_ok(r);
  auto root = parse_svg(read_file(dir / "a.svg"));
  const auto ps = panels(*root);
  REQUIRE(ps.size() == 4);  // decoder layers * heads
  std::vector<std::string> cols;
  for (char c : text) cols.push_back(c == ' ' ? "\u2423" : std::string(1, c));
  std::vector<std::string> rows;
  for (char c : decoded) rows.push_back(std::string(1, c));
  rows.push_back("<eos>");
  for (const auto& p : ps) {
    INFO(p.title);
    CHECK(p.title.find("cross_attn") != std::string::npos);
    CHECK(p.col_labels == cols);
    CHECK(p.row_labels == rows);
    REQUIRE(p.weights.size() == rows.size());
    for (const auto& w : p.weights) {
      REQUIRE(w.size() == cols.size());
      double sum = 0;
      for (double v : w) sum += v;
      CHECK(sum == Approx(1.0).margin(0.01));
    }
  }
  require_clean_error(run_heed({"attention", "--checkpoint", dir / "model.safetensors", "--text", "caf\xc3\xa9", "--out", dir / "b.svg"}),
                      1, {"--text"});
}

TEST_CASE("heed plot: train and val curves of each log, one colour per run", "[svg][cli]") {
  ScratchDir dir("plot");
  std::filesystem::create_directories(dir / "runA");
  std::filesystem::create_directories(dir / "runB");
  write_file(dir / "runA/log.jsonl", "{\"iter\":0,\"train_loss\":4.2,\"val_loss\":4.3}\n{\"iter\":100,\"train_loss\":2.0,\"val_loss\":2.2}\n");
  write_file(dir / "runB/log.jsonl", "{\"iter\":0,\"train_loss\":4.1,\"val_loss\":4.2}\n{\"iter\":50,\"train_loss\":3.0,\"val_loss\":3.1}\n"
                                     "{\"iter\":100,\"train_loss\":1.5,\"val_loss\":1.9}\n");
  ProcessResult r = run_heed({"plot", "--log", dir / "runA/log.jsonl", "--log", dir / "runB/log.jsonl", "--out", dir / "p.svg"});
  require_ok(r);
  auto root = parse_svg(read_file(dir / "p.svg"));
  const auto lines = root->elements("polyline", "curve");
  REQUIRE(lines.size() == 4);
  CHECK(lines[0]->attr("stroke") == lines[1]->attr("stroke"));  // runA train, val
  CHECK(lines[2]->attr("stroke") == lines[3]->attr("stroke"));  // runB train, val
  CHECK(lines[0]->attr("stroke") != lines[2]->attr("stroke"));
  CHECK(lines[0]->attr("stroke-dasharray").empty());
  CHECK(!lines[1]->attr("stroke-dasharray").empty());
  const std::string text = root->all_text();
  for (const char* want : {"runA train", "runA val", "runB train", "runB val"}) CHECK(text.find(want) != std::string::npos);
  // a log line without the losses is an error naming the file and the line
  write_file(dir / "bad.jsonl", "{\"iter\":0,\"train_loss\":4.2,\"val_loss\":4.3}\n{\"iter\":1}\n");
  require_clean_error(run_heed({"plot", "--log", dir / "bad.jsonl", "--out", dir / "q.svg"}), 1, {"bad.jsonl", "line 2"});
}
