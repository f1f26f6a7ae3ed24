#include "dist/sum_tree.h"

#include <algorithm>
#include <bit>

#include "core/check.h"

namespace heed::dist {

SumTree::SumTree(int64_t leaves) : leaves_(leaves) {
  HEED_CHECK(leaves >= 1, "SumTree: needs at least one micro-batch, got ", leaves);
}

int64_t SumTree::split(Span node) {
  return node.lo + static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(node.size() - 1)));
}

bool SumTree::is_node(Span s) const {
  if (s.lo < 0 || s.hi > leaves_ || s.size() < 1) return false;
  Span node{0, leaves_};
  while (!(node == s)) {
    if (node.size() == 1) return false;
    const int64_t mid = split(node);
    if (s.hi <= mid) node = {node.lo, mid};
    else if (s.lo >= mid) node = {mid, node.hi};
    else return false;  // s straddles the split
  }
  return true;
}

static void cover_into(Span node, Span range, std::vector<Span>& out) {
  if (node.hi <= range.lo || node.lo >= range.hi) return;
  if (node.lo >= range.lo && node.hi <= range.hi) {
    out.push_back(node);
    return;
  }
  const int64_t mid = SumTree::split(node);
  cover_into({node.lo, mid}, range, out);
  cover_into({mid, node.hi}, range, out);
}

std::vector<Span> SumTree::cover(Span range) const {
  HEED_CHECK(range.lo >= 0 && range.hi <= leaves_ && range.size() >= 1, "SumTree::cover: range [", range.lo, ", ",
             range.hi, ") is not a non-empty part of [0, ", leaves_, ")");
  std::vector<Span> out;
  cover_into({0, leaves_}, range, out);
  return out;
}

MergePlan plan_merges(const SumTree& tree, const std::vector<Span>& inputs) {
  MergePlan plan;
  plan.inputs = inputs;
  std::vector<Span>& stack = plan.result;
  for (size_t j = 0; j < inputs.size(); ++j) {
    const Span s = inputs[j];
    HEED_CHECK(tree.is_node(s), "plan_merges: [", s.lo, ", ", s.hi, ") is not a node of the tree over ",
               tree.leaves(), " micro-batches");
    HEED_CHECK(j == 0 || s.lo == inputs[j - 1].hi, "plan_merges: input [", s.lo, ", ", s.hi,
               ") does not start where the previous one ends (", inputs[j - 1].hi, ")");
    stack.push_back(s);
    int merges = 0;
    // The top two entries are siblings when their union is a node that splits between them.
    while (stack.size() >= 2) {
      const Span a = stack[stack.size() - 2], b = stack.back();
      const Span parent{a.lo, b.hi};
      if (!tree.is_node(parent) || SumTree::split(parent) != a.hi) break;
      stack.pop_back();
      stack.back() = parent;
      ++merges;
    }
    plan.merges.push_back(merges);
    // push_merge adds an arrival into existing entries, so only a push without merges needs a
    // new one: the stack's largest size is what the caller must provide.
    plan.depth = std::max(plan.depth, static_cast<int>(stack.size()));
  }
  return plan;
}

template <class T>
void push_merge(T* const* stack, int depth, int merges, const T* in, int64_t n) {
  if (merges == 0) {
    if (in) std::copy(in, in + n, stack[depth]);
    else std::fill(stack[depth], stack[depth] + n, T(0));
    return;
  }
  // One pass per merge, innermost first: each pass is one vectorisable loop, and each element
  // sees the same additions in the same order as a scalar walk up the tree would make.
  T* top = stack[depth - 1];
  if (in)
    for (int64_t i = 0; i < n; ++i) top[i] = top[i] + in[i];
  for (int e = depth - 2; e >= depth - merges; --e) {
    T* dst = stack[e];
    const T* src = stack[e + 1];
    for (int64_t i = 0; i < n; ++i) dst[i] = dst[i] + src[i];
  }
}

template <class T>
void tree_sum(const MergePlan& plan, const std::vector<const T*>& sources, int64_t n, T* out, T divisor) {
  HEED_CHECK(sources.size() == plan.inputs.size(), "tree_sum: ", sources.size(), " sources for a plan of ",
             plan.inputs.size(), " inputs");
  HEED_CHECK(plan.result.size() == 1, "tree_sum: the plan ends in ", plan.result.size(), " nodes, not one");
  constexpr int64_t kChunk = 2048;  // depth x 8-16 KB: stays in L1/L2 while the sources stream by
  std::vector<T> scratch(static_cast<size_t>(plan.depth) * kChunk);
  std::vector<T*> stack(plan.depth);
  for (int e = 0; e < plan.depth; ++e) stack[e] = scratch.data() + e * kChunk;
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t len = std::min(kChunk, n - c0);
    int depth = 0;
    for (size_t j = 0; j < sources.size(); ++j) {
      push_merge(stack.data(), depth, plan.merges[j], sources[j] ? sources[j] + c0 : nullptr, len);
      depth += 1 - plan.merges[j];
    }
    for (int64_t i = 0; i < len; ++i) out[c0 + i] = stack[0][i] / divisor;
  }
}

template void push_merge<float>(float* const*, int, int, const float*, int64_t);
template void push_merge<double>(double* const*, int, int, const double*, int64_t);
template void tree_sum<float>(const MergePlan&, const std::vector<const float*>&, int64_t, float*, float);
template void tree_sum<double>(const MergePlan&, const std::vector<const double*>&, int64_t, double*, double);

}  // namespace heed::dist
