// The fixed summation tree (dist/sum_tree.h): its shape, the covers ranks own, and that adding
// in it, alone or in parts owned by N ranks, gives the bits of the tree's definition.
#include <catch2/catch.hpp>
#include <bit>
#include <cstring>
#include <vector>

#include "core/random.h"
#include "dist/sum_tree.h"

using namespace heed;
using dist::Span;
using dist::SumTree;

namespace {

// The tree's definition, recursively: what every way of evaluating it must reproduce.
float reference_sum(const std::vector<float>& v, Span node) {
  if (node.size() == 1) return v[node.lo];
  const int64_t mid = SumTree::split(node);
  return reference_sum(v, {node.lo, mid}) + reference_sum(v, {mid, node.hi});
}

std::vector<Span> leaves_of(Span s) {
  std::vector<Span> out;
  for (int64_t i = s.lo; i < s.hi; ++i) out.push_back({i, i + 1});
  return out;
}

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

}  // namespace

TEST_CASE("the sum tree splits at the largest power of two below a node's size", "[dist][tree]") {
  REQUIRE(SumTree::split({0, 2}) == 1);
  REQUIRE(SumTree::split({0, 3}) == 2);
  REQUIRE(SumTree::split({0, 4}) == 2);
  REQUIRE(SumTree::split({0, 6}) == 4);
  REQUIRE(SumTree::split({4, 7}) == 6);
  REQUIRE(SumTree::split({3, 8}) == 7);
  SumTree six(6);  // ((0 1)(2 3))(4 5)
  for (Span s : {Span{0, 6}, Span{0, 4}, Span{4, 6}, Span{0, 2}, Span{2, 4}, Span{3, 4}}) REQUIRE(six.is_node(s));
  for (Span s : {Span{1, 3}, Span{2, 6}, Span{0, 3}, Span{3, 5}, Span{5, 7}, Span{2, 2}}) REQUIRE_FALSE(six.is_node(s));
  REQUIRE_THROWS_WITH(SumTree(0), Catch::Contains("at least one micro-batch"));
}

TEST_CASE("every aligned power-of-two block is a node, so such ranks own one partial sum", "[dist][tree]") {
  for (int64_t A = 1; A <= 40; ++A) {
    SumTree tree(A);
    for (int64_t size = 1; size <= A; size *= 2)
      for (int64_t lo = 0; lo + size <= A; lo += size) {
        INFO("A " << A << " block [" << lo << ", " << lo + size << ")");
        REQUIRE(tree.is_node({lo, lo + size}));
        REQUIRE(tree.cover({lo, lo + size}) == std::vector<Span>{{lo, lo + size}});
      }
  }
  // Blocks that are not aligned powers of two take several partial sums.
  REQUIRE(SumTree(6).cover({0, 3}) == std::vector<Span>{{0, 2}, {2, 3}});
  REQUIRE(SumTree(6).cover({3, 6}) == std::vector<Span>{{3, 4}, {4, 6}});
  REQUIRE(SumTree(12).cover({0, 6}) == std::vector<Span>{{0, 4}, {4, 6}});
}

TEST_CASE("merge plans: siblings combine on arrival, the stack stays log-deep", "[dist][tree]") {
  SumTree tree(7);  // ((0 1)(2 3))((4 5) 6)
  dist::MergePlan plan = dist::plan_merges(tree, leaves_of({0, 7}));
  REQUIRE(plan.merges == std::vector<int>{0, 1, 0, 2, 0, 1, 2});
  REQUIRE(plan.result == std::vector<Span>{{0, 7}});
  REQUIRE(plan.depth == 2);  // an arrival that merges is added into existing entries
  for (int64_t A = 1; A <= 64; ++A) {
    dist::MergePlan p = dist::plan_merges(SumTree(A), leaves_of({0, A}));
    REQUIRE(p.result == std::vector<Span>{{0, A}});
    REQUIRE(p.depth <= static_cast<int>(std::bit_width(static_cast<uint64_t>(A))));
  }
  REQUIRE_THROWS_WITH(dist::plan_merges(tree, {{0, 2}, {3, 4}}), Catch::Contains("does not start where"));
  REQUIRE_THROWS_WITH(dist::plan_merges(tree, {{0, 3}}), Catch::Contains("is not a node"));
}

TEST_CASE("adding in the tree, alone or in parts owned by N ranks, gives the definition's bits", "[dist][tree]") {
  Generator gen(42);
  const int64_t n = 3000;  // more than one chunk of tree_sum
  for (int64_t A = 1; A <= 16; ++A) {
    // values of very different magnitudes, so that the order of additions shows in the bits
    std::vector<std::vector<float>> grads(A, std::vector<float>(n));
    for (auto& g : grads)
      for (float& x : g) x = static_cast<float>(gen.normal() * std::exp2(gen.randint(40) - 20));
    SumTree tree(A);
    std::vector<float> expected(n);
    for (int64_t i = 0; i < n; ++i) {
      std::vector<float> column(A);
      for (int64_t k = 0; k < A; ++k) column[k] = grads[k][i];
      expected[i] = reference_sum(column, {0, A}) / static_cast<float>(A);
    }
    for (int64_t N = 1; N <= A; ++N) {
      if (A % N) continue;
      INFO("A " << A << ", N " << N);
      // Each rank adds its micro-batches as they come, keeping the stack of partial sums...
      std::vector<const float*> sources;
      std::vector<std::vector<float>> kept;
      std::vector<Span> inputs;
      for (int64_t r = 0; r < N; ++r) {
        const Span mine{r * A / N, (r + 1) * A / N};
        dist::MergePlan local = dist::plan_merges(tree, leaves_of(mine));
        REQUIRE(local.result == tree.cover(mine));
        std::vector<std::vector<float>> stack(local.depth, std::vector<float>(n));
        std::vector<float*> ptr;
        for (auto& s : stack) ptr.push_back(s.data());
        int depth = 0;
        for (size_t j = 0; j < local.inputs.size(); ++j) {
          dist::push_merge(ptr.data(), depth, local.merges[j], grads[mine.lo + j].data(), n);
          depth += 1 - local.merges[j];
        }
        REQUIRE(depth == static_cast<int>(local.result.size()));
        for (int e = 0; e < depth; ++e) kept.push_back(stack[e]);
        inputs.insert(inputs.end(), local.result.begin(), local.result.end());
      }
      // ...and the ranks' partial sums are added in the tree's order.
      for (auto& k : kept) sources.push_back(k.data());
      std::vector<float> got(n);
      dist::tree_sum(dist::plan_merges(tree, inputs), sources, n, got.data(), static_cast<float>(A));
      REQUIRE(std::memcmp(got.data(), expected.data(), n * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("the tree's order is not the sequential order: the test above can tell them apart", "[dist][tree]") {
  // In float, 1 + 1e8 rounds to 1e8: ((1 + 1e8) + -1e8) + 1 is 1, (1 + 1e8) + (-1e8 + 1) is 0.
  std::vector<float> v{1.0f, 1e8f, -1e8f, 1.0f};
  std::vector<const float*> sources{&v[0], &v[1], &v[2], &v[3]};
  std::vector<Span> leaves{{0, 1}, {1, 2}, {2, 3}, {3, 4}};
  float tree_result = -1;
  dist::tree_sum(dist::plan_merges(SumTree(4), leaves), sources, 1, &tree_result, 1.0f);
  REQUIRE(bits(tree_result) == bits(0.0f));
  REQUIRE(((v[0] + v[1]) + v[2]) + v[3] == 1.0f);
  // A null source stands for zeros.
  std::vector<const float*> with_zero{&v[0], nullptr, &v[2], &v[3]};
  dist::tree_sum(dist::plan_merges(SumTree(4), leaves), with_zero, 1, &tree_result, 2.0f);
  REQUIRE(tree_result == (1.0f + (-1e8f + 1.0f)) / 2.0f);
}
