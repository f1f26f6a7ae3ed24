// heed::dist: the fixed order in which one optimizer step's micro-batch gradients are added up,
// so that the sum has the same bits however many processes share the micro-batches.
//
// Float addition is commutative (a + b == b + a, bit for bit) but not associative: (a + b) + c
// and a + (b + c) can differ in the last bit, and over thousands of steps such bits grow into
// different models. So every process, alone or one of N, adds exactly the pairs that one binary
// tree over the micro-batch indices 0..A-1 prescribes, and that tree depends on A alone.
//
// The tree: a node [lo, hi) of two or more indices splits at lo + 2^k, 2^k the largest power of
// two below hi - lo. Every aligned block [i 2^j, (i + 1) 2^j) inside [0, A) is then a node, so N
// processes that take A / N consecutive micro-batches each, A / N a power of two, each own one
// subtree and send one partial sum. A = 6: ((0 1)(2 3))(4 5); A = 7: ((0 1)(2 3))((4 5) 6).
//
// Values arrive left to right (micro-batch 0's gradient first, or rank 0's partial sums first);
// a stack keeps the nodes whose sibling has not arrived, and an arrival is added into the entries
// it completes (MergePlan). The stack never holds more than about log2(A) + 1 entries.
#pragma once

#include <cstdint>
#include <vector>

namespace heed::dist {

/// Micro-batch indices [lo, hi): a node of the tree, or the range of micro-batches a rank owns.
struct Span {
  int64_t lo = 0, hi = 0;
  int64_t size() const { return hi - lo; }
  bool operator==(const Span&) const = default;
};

/// The summation tree over the A micro-batches of one step.
class SumTree {
 public:
  /// A tree over `leaves` indices (>= 1; else heed::Error).
  explicit SumTree(int64_t leaves);
  int64_t leaves() const { return leaves_; }
  /// Where a node of two or more indices splits: lo + the largest power of two below its size.
  static int64_t split(Span node);
  /// Whether `s` is a node of this tree.
  bool is_node(Span s) const;
  /// The largest nodes inside `range` (within [0, A)), left to right: the partial sums that the
  /// owner of those micro-batches can form alone.
  std::vector<Span> cover(Span range) const;

 private:
  int64_t leaves_;
};

/// How values arriving left to right are combined: inputs[j] (a node of the tree; each starts
/// where the previous one ends) is added into the top merges[j] stack entries when it arrives
/// (0: it is pushed as a new entry). `result` is what the stack holds at the end, `depth` the
/// most entries it ever holds.
struct MergePlan {
  std::vector<Span> inputs;
  std::vector<int> merges;
  std::vector<Span> result;
  int depth = 0;
};

/// The plan for `inputs` on `tree`; throws heed::Error if they are not consecutive nodes.
MergePlan plan_merges(const SumTree& tree, const std::vector<Span>& inputs);

/// One arrival, on n elements: with merges == 0, copies `in` into stack[depth]; else adds it into
/// the top `merges` entries, innermost first (v = in; v = stack[e] + v for e = depth-1, depth-2,
/// ...), and stores the result in stack[depth - merges]. `in` null stands for zeros.
template <class T>
void push_merge(T* const* stack, int depth, int merges, const T* in, int64_t n);

/// out[i] = (the tree sum of sources[0][i], sources[1][i], ...) / divisor, where sources[j] holds
/// the value of plan.inputs[j] and the plan ends in one node. Works through the n elements in
/// chunks that stay in cache.
template <class T>
void tree_sum(const MergePlan& plan, const std::vector<const T*>& sources, int64_t n, T* out, T divisor);

}  // namespace heed::dist
