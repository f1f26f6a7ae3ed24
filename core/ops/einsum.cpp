// einsum (torch.einsum), composed from differentiable ops: a repeated subscript within one operand
// is a diagonal view (the one op of this file with its own backward), a subscript no other operand
// or the output names is summed away at once, and each pair of operands, left to right, is one
// batched matmul: the shared subscripts kept for the output (or a later operand) are its batch
// axes, those summed its inner axis, and the others its rows and columns. "bij,bjk->bik" and
// "bhqd,bhkd->bhqk" are thus one matmul on views of the operands (a transposed operand reaches
// GEMM as a transpose flag, not a copy). A pair with nothing to sum, or with one element per
// batch on each side (batched dot products), is a broadcast mul (and sum) instead, as torch's.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "core/autograd.h"
#include "core/ops.h"
#include "core/ops/strided.h"

namespace heed {

namespace {

// Subscripts are numbered 'A'..'Z' -> 0..25, 'a'..'z' -> 26..51 (so an implicit output, sorted by
// number, puts upper case first, as torch's), and the ellipsis's axes 52, 53, ...: the ellipsis of
// an operand with fewer of them takes the last numbers, so they line up from the right and broadcast.
constexpr int kLetters = 52;

int letter_label(char c) { return c >= 'A' && c <= 'Z' ? c - 'A' : c - 'a' + 26; }

// "subscript 'i'", or "the ellipsis's dim 0" (counted from the left of the widest ellipsis).
std::string label_name(int label) {
  if (label < 26) return std::string("subscript '") + char('A' + label) + "'";
  if (label < kLetters) return std::string("subscript '") + char('a' + label - 26) + "'";
  return "the ellipsis's dim " + std::to_string(label - kLetters);
}

// One side's subscripts as written: letters, and where the ellipsis stands (if any).
struct Term {
  std::vector<int> letters;  // letter labels, in order
  int ellipsis_at = -1;      // how many letters come before the ellipsis; -1: none
  std::string text;          // as written, without spaces (for errors)
};

struct Equation {
  std::vector<Term> inputs;
  Term output;
  bool explicit_output = false;
};

// Splits and checks the equation's characters: letters, ',', one "->", "..." at most once per
// term, spaces anywhere between them.
Equation parse(const std::string& eq) {
  Equation out;
  out.inputs.emplace_back();
  Term* term = &out.inputs.back();
  auto term_name = [&] {
    return out.explicit_output ? std::string("the output") : "operand " + std::to_string(out.inputs.size() - 1);
  };
  // Every character checked first, so that the messages below can quote the equation on one line.
  for (size_t i = 0; i < eq.size(); ++i) {
    const char c = eq[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (letter || c == ' ' || c == '.' || c == ',' || c == '-' || c == '>') continue;
    const bool printable = c > ' ' && c < 127;  // a newline or a control byte would break the line
    const int byte = static_cast<unsigned char>(c);
    detail::fail("einsum: invalid character ",
                 printable ? std::string("'") + c + "'" : "(byte " + std::to_string(byte) + ")",
                 " at index ", i, " of the equation: subscripts are letters a-z, A-Z, an ellipsis '...', ',' between ",
                 "operands and one '->'");
  }
  for (size_t i = 0; i < eq.size(); ++i) {
    const char c = eq[i];
    if (c == ' ') continue;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      term->letters.push_back(letter_label(c));
      term->text += c;
    } else if (c == '.') {
      HEED_CHECK(eq.compare(i, 3, "...") == 0, "einsum: a '.' at index ", i, " of \"", eq, "\" in ", term_name(),
                 "'s subscripts is not part of an ellipsis '...'");
      HEED_CHECK(term->ellipsis_at < 0, "einsum: ", term_name(), "'s subscripts in \"", eq,
                 "\" have more than one ellipsis '...'");
      term->ellipsis_at = static_cast<int>(term->letters.size());
      term->text += "...";
      i += 2;
    } else if (c == ',' && !out.explicit_output) {
      out.inputs.emplace_back();
      term = &out.inputs.back();
    } else if (c == ',') {
      detail::fail("einsum: a ',' at index ", i, " of \"", eq, "\" is in the output's subscripts (after '->')");
    } else if (c == '-' && i + 1 < eq.size() && eq[i + 1] == '>') {
      HEED_CHECK(!out.explicit_output, "einsum: a second '->' at index ", i, " of \"", eq, "\"");
      out.explicit_output = true;
      term = &out.output;
      ++i;
    } else {
      detail::fail("einsum: a stray '", c, "' at index ", i, " of \"", eq, "\" (the output follows one '->')");
    }
  }
  return out;
}

// Operand `t` with the axes of each repeated label (of one size: checked by the caller) merged
// into one: its diagonal, a view (the stride is the sum of theirs). The backward writes the
// gradient onto the diagonal of zeros.
Tensor diagonal_of_repeats(const Tensor& t, const std::vector<int>& labels, std::vector<int>& out_labels) {
  Shape shape, strides;
  out_labels.clear();
  std::vector<size_t> slot(labels.size());
  for (size_t d = 0; d < labels.size(); ++d) {
    auto it = std::find(out_labels.begin(), out_labels.end(), labels[d]);
    if (it == out_labels.end()) {
      slot[d] = out_labels.size();
      out_labels.push_back(labels[d]);
      shape.push_back(t.shape()[d]);
      strides.push_back(t.strides()[d]);
      continue;
    }
    slot[d] = static_cast<size_t>(it - out_labels.begin());
    strides[slot[d]] += t.strides()[d];
  }
  if (out_labels.size() == labels.size()) return t;
  Tensor out = make_view(t, shape, strides, t.offset());
  return record("einsum_diagonal", out, {t}, [from = t.shape(), shape, slot](const Tensor& g) {
    Tensor dx = Tensor::zeros(from, g.dtype());
    const Shape cs = contiguous_strides(from);
    Shape ds(shape.size(), 0);
    for (size_t d = 0; d < slot.size(); ++d) ds[slot[d]] += cs[d];
    make_view(dx, shape, ds, 0).copy_(g);
    return std::vector<Tensor>{dx};
  });
}

// The operand's axes in the order of `want` (labels it has), a permute unless already in order.
Tensor arrange(const Tensor& t, const std::vector<int>& labels, const std::vector<int>& want) {
  std::vector<int64_t> axes;
  for (int l : want) axes.push_back(std::find(labels.begin(), labels.end(), l) - labels.begin());
  bool identity = true;
  for (size_t i = 0; i < axes.size(); ++i) identity = identity && axes[i] == static_cast<int64_t>(i);
  return identity ? t : permute(t, axes);
}

Tensor reshaped(const Tensor& t, const Shape& shape) { return t.shape() == shape ? t : reshape(t, shape); }

bool has(const std::vector<int>& v, int l) { return std::find(v.begin(), v.end(), l) != v.end(); }

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  const Equation eq = parse(equation);
  const size_t n = operands.size();
  HEED_CHECK(eq.inputs.size() == n, "einsum: the equation \"", equation, "\" has subscripts for ", eq.inputs.size(),
             " operand", eq.inputs.size() == 1 ? "" : "s", " but ", n, " ", n == 1 ? "was" : "were", " given");
  for (size_t k = 0; k < n; ++k) {
    HEED_CHECK(operands[k].defined(), "einsum: operand ", k, " is an undefined tensor");
    detail::check_floating(operands[k], "einsum");
    HEED_CHECK(operands[k].dtype() == operands[0].dtype(), "einsum: operand ", k, " is ",
               dtype_name(operands[k].dtype()), " but operand 0 is ", dtype_name(operands[0].dtype()));
  }

  // Each operand's labels, one per axis, the ellipsis's axes numbered from the right.
  int64_t ell = 0;  // the most axes any operand's ellipsis covers
  for (size_t k = 0; k < n; ++k) {
    const Term& t = eq.inputs[k];
    const int64_t letters = static_cast<int64_t>(t.letters.size()), dims = operands[k].dim();
    if (t.ellipsis_at < 0)
      HEED_CHECK(letters == dims, "einsum: operand ", k, " has ", dims, " dims ", to_string(operands[k].shape()),
                 " but its subscripts \"", t.text, "\" name ", letters);
    else
      HEED_CHECK(letters <= dims, "einsum: operand ", k, " has ", dims, " dims ", to_string(operands[k].shape()),
                 ", fewer than the ", letters, " letters of its subscripts \"", t.text, "\"");
    ell = std::max(ell, dims - letters);
  }
  std::vector<std::vector<int>> labels(n);
  for (size_t k = 0; k < n; ++k) {
    const Term& t = eq.inputs[k];
    const int64_t covered = operands[k].dim() - static_cast<int64_t>(t.letters.size());
    for (size_t i = 0; i <= t.letters.size(); ++i) {
      if (static_cast<int>(i) == t.ellipsis_at)
        for (int64_t e = ell - covered; e < ell; ++e) labels[k].push_back(kLetters + static_cast<int>(e));
      if (i < t.letters.size()) labels[k].push_back(t.letters[i]);
    }
  }

  // The output's labels: as written, or the ellipsis's axes and then every letter used once.
  std::vector<int> out_labels;
  std::array<int, kLetters> uses{};
  for (const Term& t : eq.inputs)
    for (int l : t.letters) ++uses[l];
  if (eq.explicit_output) {
    const Term& t = eq.output;
    for (size_t i = 0; i <= t.letters.size(); ++i) {
      if (static_cast<int>(i) == t.ellipsis_at)
        for (int64_t e = 0; e < ell; ++e) out_labels.push_back(kLetters + static_cast<int>(e));
      if (i == t.letters.size()) break;
      const int l = t.letters[i];
      HEED_CHECK(uses[l] > 0, "einsum: output ", label_name(l), " in \"", equation,
                 "\" does not appear in any input's subscripts");
      HEED_CHECK(!has(out_labels, l), "einsum: output ", label_name(l), " appears more than once in \"",
                 equation, "\"");
      out_labels.push_back(l);
    }
  } else {
    for (int64_t e = 0; e < ell; ++e) out_labels.push_back(kLetters + static_cast<int>(e));
    for (int l = 0; l < kLetters; ++l)
      if (uses[l] == 1) out_labels.push_back(l);
  }

  // Every label's size: equal wherever it appears, or 1 there (broadcast, as torch's).
  std::vector<int64_t> size(kLetters + ell, -1);
  std::vector<size_t> seen_in(size.size(), 0);
  for (size_t k = 0; k < n; ++k) {
    std::vector<int64_t> own(size.size(), -1);  // within one operand a repeat must match exactly
    for (size_t d = 0; d < labels[k].size(); ++d) {
      const int l = labels[k][d];
      const int64_t s = operands[k].shape()[d];
      HEED_CHECK(own[l] < 0 || own[l] == s, "einsum: ", label_name(l), " is repeated in operand ", k, " ",
                 to_string(operands[k].shape()), " over axes of different sizes, ", own[l], " and ", s);
      own[l] = s;
      if (size[l] < 0 || size[l] == 1) {
        size[l] = s;
        seen_in[l] = k;
      } else {
        HEED_CHECK(s == 1 || s == size[l], "einsum: ", label_name(l), " has size ", s, " in operand ", k,
                   " ", to_string(operands[k].shape()), " but ", size[l], " in operand ", seen_in[l], " ",
                   to_string(operands[seen_in[l]].shape()), " (sizes must match or be 1)");
      }
    }
  }

  // Repeated labels -> diagonals; then each label no other operand and not the output needs is
  // summed at once.
  std::vector<Tensor> ts(n);
  for (size_t k = 0; k < n; ++k) {
    std::vector<int> unique;
    ts[k] = diagonal_of_repeats(operands[k], labels[k], unique);
    labels[k] = unique;
  }
  auto needed_after = [&](int l, size_t k) {  // by the output or an operand after k
    if (has(out_labels, l)) return true;
    for (size_t j = k + 1; j < n; ++j)
      if (has(labels[j], l)) return true;
    return false;
  };
  for (size_t k = 0; k < n; ++k) {
    std::vector<int64_t> axes;
    std::vector<int> kept;
    for (size_t d = 0; d < labels[k].size(); ++d) {
      const int l = labels[k][d];
      bool elsewhere = has(out_labels, l);
      for (size_t j = 0; j < n && !elsewhere; ++j) elsewhere = j != k && has(labels[j], l);
      if (elsewhere)
        kept.push_back(l);
      else
        axes.push_back(static_cast<int64_t>(d));
    }
    if (!axes.empty()) {
      ts[k] = sum(ts[k], axes);
      labels[k] = kept;
    }
  }

  // Left to right: result (labels `lr`) times operand k, one batched matmul.
  Tensor result = ts[0];
  std::vector<int> lr = labels[0];
  for (size_t k = 1; k < n; ++k) {
    Tensor right = ts[k];
    const std::vector<int>& rl = labels[k];
    std::vector<int> batch, left_only, summed, right_only;
    for (int l : lr) {
      if (!has(rl, l))
        left_only.push_back(l);
      else if (needed_after(l, k))
        batch.push_back(l);
      else
        summed.push_back(l);
    }
    for (int l : rl)
      if (!has(lr, l)) right_only.push_back(l);
    // A summed label of size 1 on one side only broadcasts: sum the other side's axis first.
    for (int l : summed) {
      const int64_t dl = std::find(lr.begin(), lr.end(), l) - lr.begin();
      const int64_t dr = std::find(rl.begin(), rl.end(), l) - rl.begin();
      if (result.shape()[dl] == right.shape()[dr]) continue;
      if (result.shape()[dl] == 1)
        right = sum(right, dr, /*keepdim=*/true);
      else
        result = sum(result, dl, /*keepdim=*/true);
    }
    auto size_in = [](const Tensor& t, const std::vector<int>& from, int l) {
      return t.shape()[std::find(from.begin(), from.end(), l) - from.begin()];
    };
    auto product = [&](const Tensor& t, const std::vector<int>& from, const std::vector<int>& want) {
      int64_t p = 1;
      for (int l : want) p *= size_in(t, from, l);
      return p;
    };
    Shape ls, rs, out_shape;  // batch axes of size 1 broadcast (in matmul or mul)
    for (int l : batch) {
      ls.push_back(size_in(result, lr, l));
      rs.push_back(size_in(right, rl, l));
      out_shape.push_back(ls.back() == 1 ? rs.back() : ls.back());  // 1 against 0 is 0, not max's 1
    }
    for (int l : left_only) out_shape.push_back(size_in(result, lr, l));
    for (int l : right_only) out_shape.push_back(size_in(right, rl, l));
    std::vector<int> lorder = batch, rorder = batch;
    lorder.insert(lorder.end(), left_only.begin(), left_only.end());
    lorder.insert(lorder.end(), summed.begin(), summed.end());
    const int64_t M = product(result, lr, left_only), K = product(result, lr, summed);
    const int64_t N = product(right, rl, right_only);
    if (!summed.empty() && (M > 1 || N > 1)) {
      // left (batch..., M, K) @ right (batch..., K, N).
      rorder.insert(rorder.end(), summed.begin(), summed.end());
      rorder.insert(rorder.end(), right_only.begin(), right_only.end());
      ls.insert(ls.end(), {M, K});
      rs.insert(rs.end(), {K, N});
      const Tensor a = reshaped(arrange(result, lr, lorder), ls);
      const Tensor b = reshaped(arrange(right, rl, rorder), rs);
      result = reshaped(matmul(a, b), out_shape);
    } else {
      // Nothing to sum (an outer or elementwise product) or only one element per batch (dot
      // products): one mul, broadcast, then a sum over the summed axes (as torch, where a
      // product would be batches of 1 x 1 GEMMs). left (batch..., left..., 1..., summed...) *
      // right (batch..., 1..., right..., summed...).
      rorder.insert(rorder.end(), right_only.begin(), right_only.end());
      rorder.insert(rorder.end(), summed.begin(), summed.end());
      for (int l : left_only) {
        ls.push_back(size_in(result, lr, l));
        rs.push_back(1);
      }
      for (int l : right_only) {
        ls.push_back(1);
        rs.push_back(size_in(right, rl, l));
      }
      std::vector<int64_t> sum_axes;
      for (int l : summed) {
        sum_axes.push_back(static_cast<int64_t>(ls.size()));
        ls.push_back(size_in(result, lr, l));
        rs.push_back(size_in(right, rl, l));
      }
      result = mul(reshaped(arrange(result, lr, lorder), ls), reshaped(arrange(right, rl, rorder), rs));
      if (!sum_axes.empty()) result = sum(result, sum_axes);
    }
    lr = batch;
    lr.insert(lr.end(), left_only.begin(), left_only.end());
    lr.insert(lr.end(), right_only.begin(), right_only.end());
  }

  // What is left holds exactly the output's labels: put them in its order, at their full sizes.
  result = arrange(result, lr, out_labels);
  Shape out_shape;
  for (int l : out_labels) out_shape.push_back(size[l]);
  return result.shape() == out_shape ? result : expand(result, out_shape);
}

}  // namespace heed
