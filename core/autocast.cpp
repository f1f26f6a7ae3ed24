#include "core/autocast.h"

namespace heed {
namespace {
thread_local std::optional<Bf16Kernel> g_autocast;  // per thread, as autograd's grad mode
}  // namespace

AutocastBF16::AutocastBF16(bool enabled, Bf16Kernel kernel) : previous_(g_autocast) {
  g_autocast = enabled ? std::optional<Bf16Kernel>(kernel) : std::nullopt;
}

AutocastBF16::~AutocastBF16() { g_autocast = previous_; }

std::optional<Bf16Kernel> autocast_bf16() { return g_autocast; }

}  // namespace heed
