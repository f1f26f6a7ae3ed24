// heed (internal): how heed allocates its large buffers (tensor storage, packed bf16 operands).
#pragma once

#include <cstddef>

namespace heed::detail {

/// `bytes` of memory aligned to 64 bytes (a cache line, every vector width), or nullptr. A block of
/// 2 MiB or more is aligned to 2 MiB and rounded up to whole 2 MiB pages, and the kernel is asked to
/// back it with transparent huge pages (Debian's default THP mode is "madvise": only advised memory
/// gets them): one page fault and one TLB entry per 2 MiB instead of 512. Loading the small config's
/// 42 MB checkpoint faulted about 30 000 4 KiB pages, a third of `heed sample`'s start. The rounding
/// wastes less than 2 MiB a block. Free with std::free.
void* allocate_aligned(size_t bytes);

}  // namespace heed::detail
