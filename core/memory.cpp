#include "core/memory.h"

#include <cstdlib>

#include <sys/mman.h>

namespace heed::detail {

void* allocate_aligned(size_t bytes) {
  constexpr size_t kLine = 64, kHugePage = size_t(2) << 20;
  if (bytes < kHugePage) return std::aligned_alloc(kLine, (bytes + kLine - 1) / kLine * kLine);
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (p) madvise(p, rounded, MADV_HUGEPAGE);  // advice only: without THP the pages stay 4 KiB
  return p;
}

}  // namespace heed::detail
