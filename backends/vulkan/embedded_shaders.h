// SPIR-V of backends/vulkan/shaders/*.comp, compiled by glslc at build time and embedded by
// cmake/embed_spirv.cmake (the generated embedded_shaders.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tmorph::vk {

struct EmbeddedShader {
  const char* name;  // the file name without ".comp"
  const uint32_t* words;
  size_t bytes;
};

// Null when no shader has that name.
const EmbeddedShader* find_shader(const std::string& name);

}  // namespace tmorph::vk
