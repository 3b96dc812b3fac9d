// decode.bitshuffle_lz4 on the GPU backends (the CUDA/HIP source under the host grid emulation in CI, real
// devices where they exist): chunks written by the encoder decode to the original bytes, exactly as the CPU
// (liblz4) decodes them; damaged chunks are refused naming the same chunk as the CPU, and never crash.
// Instantiated for gpuemu, cuda and hip with the rest of the GpuParity suite (gpu_parity_test.cpp).
#include "gpu_fixture.h"

#include <random>

#include "formats/bitshuffle_lz4.h"
#include "tensormorph/contract_math.h"

namespace tmorph::gpu_test {
namespace {

struct Chunks {
  std::vector<uint8_t> bytes;
  std::vector<uint64_t> offsets{0};
};

struct Decoded {
  tm_status status = TM_OK;
  std::string message;
  std::vector<uint8_t> bytes;
};

// The masking extension and the device output (op_contracts.h, plugin_abi.h): what the 4D-STEM products use to
// keep decoded frames on the device.
struct Masked {
  Decoded decoded;
  uint64_t all_ones = 0, failed_chunk = UINT64_MAX;
};

// Runs the op on backend `name` (strict placement) over `chunks` of chunk_elements elements of dt; with
// `masking`, all-ones elements and the listed elements are zeroed (the masking extension); a nonzero
// output_buffer receives the output on the device (the host bytes then stay empty).
Masked decode_masked_on(const BackendRegistry& registry, const CostModel& costs, const std::string& name, DType dt,
                        const Chunks& chunks, uint64_t chunk_elements, const std::vector<uint32_t>& zero_list,
                        uint64_t output_buffer = 0, bool masking = true) {
  const uint64_t count = chunks.offsets.size() - 1;
  OpRequest r;
  r.op = TM_OP_DECODE_BITSHUFFLE_LZ4, r.dtype = dt, r.elements = count * chunk_elements, r.bytes = chunks.bytes.size();
  Constraints c;
  c.strict_backend = name;
  const Placement p = Planner(registry, costs, c).place(r);
  Masked m;
  tm_decode_bitshuffle_lz4_params_v1 params = decode_params(count, chunk_elements, chunks.offsets.data());
  params.flags = masking ? TM_DECODE_ZERO_ALL_ONES : 0, params.zero_elements = zero_list.data(), params.zero_element_count = zero_list.size();
  params.all_ones_zeroed = &m.all_ones, params.failed_chunk = &m.failed_chunk;
  if (!output_buffer) m.decoded.bytes.assign(r.elements * dtype_size(dt), 0);
  tm_kernel_call_v1 call{};
  call.struct_size = sizeof call;
  call.op = TM_OP_DECODE_BITSHUFFLE_LZ4, call.kernel_index = p.kernel_index, call.device_index = p.device_index;
  call.dtype = static_cast<tm_dtype>(dt);
  call.input = chunks.bytes.data(), call.element_count = r.elements;
  // Unmasked calls pass the first version of the params (without the extension), as older callers do.
  call.params = &params, call.params_size = masking || output_buffer ? sizeof params : TM_DECODE_BITSHUFFLE_LZ4_PARAMS_BASE_SIZE;
  call.output = output_buffer ? nullptr : m.decoded.bytes.data(), call.output_size = m.decoded.bytes.size(), call.threads = 2;
  call.output_buffer = output_buffer;
  tm_message msg{};
  m.decoded.status = p.backend_ref->table->run(&call, &msg);
  m.decoded.message = msg.text;
  return m;
}

Decoded decode_on(const BackendRegistry& registry, const CostModel& costs, const std::string& name, DType dt, const Chunks& chunks,
                  uint64_t chunk_elements) {
  return decode_masked_on(registry, costs, name, dt, chunks, chunk_elements, {}, 0, false).decoded;
}

// Frames of counts: mostly small values (compressible, as detector frames are), every fourth chunk noise
// (LZ4 literals only); the values fill the dtype's width.
std::vector<uint8_t> frames(DType dt, uint64_t chunks, uint64_t elements, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const size_t w = dtype_size(dt);
  std::vector<uint8_t> out(chunks * elements * w);
  std::poisson_distribution<int> counts(0.7);
  for (uint64_t c = 0; c < chunks; ++c)
    for (uint64_t i = 0; i < elements; ++i) {
      const uint64_t v = c % 4 == 3 ? rng() : static_cast<uint64_t>(counts(rng)) << (i % 97 == 0 ? 8 * w - 4 : 0);
      std::memcpy(&out[(c * elements + i) * w], &v, w);  // little-endian: the low bytes
    }
  return out;
}

Chunks encode(const std::vector<uint8_t>& data, DType dt, uint64_t chunks, uint64_t elements, uint32_t block_elements) {
  Chunks out;
  const size_t w = dtype_size(dt);
  for (uint64_t c = 0; c < chunks; ++c) {
    const auto chunk = encode_bitshuffle_lz4_chunk(data.data() + c * elements * w, elements, static_cast<uint32_t>(w), block_elements);
    out.bytes.insert(out.bytes.end(), chunk.begin(), chunk.end());
    out.offsets.push_back(out.bytes.size());
  }
  return out;
}

struct ScopedChunk : test::ScopedEnv {
  explicit ScopedChunk(const char* bytes) : test::ScopedEnv("TENSORMORPH_GPU_CHUNK_BYTES", bytes) {}
};

TEST_P(GpuParity, DecodeBitshuffleLz4ChunksToTheOriginalBytes) {
  ScopedChunk chunk("8192");  // several pieces per call
  for (DType dt : {DType::U8, DType::U16, DType::U32, DType::U64})
    for (uint64_t elements : {uint64_t{5}, uint64_t{8}, uint64_t{1000}, uint64_t{4099}})
      for (uint32_t block : {0u, 16u}) {
        const uint64_t chunks = 9;
        const auto data = frames(dt, chunks, elements, elements * 7 + block + dtype_size(dt));
        const Chunks in = encode(data, dt, chunks, elements, block);
        const std::string where = std::string(dtype_name(dt)) + " elements " + std::to_string(elements) + " block " + std::to_string(block);
        const Decoded g = decode_on(*registry_, costs_, GetParam(), dt, in, elements);
        const Decoded c = decode_on(*registry_, costs_, "cpu", dt, in, elements);
        ASSERT_EQ(c.status, TM_OK) << where << ": " << c.message;
        ASSERT_EQ(g.status, TM_OK) << where << ": " << g.message;
        ASSERT_EQ(c.bytes, data) << where;
        ASSERT_EQ(g.bytes, data) << where;
      }
}

// Damaged chunks (bytes flipped, chunks cut short, size prefixes and headers rewritten): the backend refuses
// exactly when the CPU does, naming the same chunk, or decodes the same bytes. The one allowed difference is
// the contract's: an LZ4 match offset of 0, which liblz4 accepts and the device refuses.
TEST_P(GpuParity, DecodeBitshuffleLz4DamagedChunksAreRefusedLikeTheCpu) {
  ScopedChunk chunk("16384");
  const DType dt = DType::U16;
  const uint64_t chunks = 12, elements = 1203;
  const auto data = frames(dt, chunks, elements, 5);
  const Chunks good = encode(data, dt, chunks, elements, 64);
  std::mt19937_64 rng(11);
  int refused = 0, offset_zero = 0;
  for (int trial = 0; trial < 400; ++trial) {
    Chunks bad = good;
    const uint64_t victim = rng() % chunks, start = bad.offsets[victim], length = bad.offsets[victim + 1] - start;
    switch (trial % 4) {
      case 0:  // flip 1..3 bytes after the header
        for (int k = 0; k < 1 + trial % 3; ++k) bad.bytes[start + 12 + rng() % (length - 12)] ^= static_cast<uint8_t>(1 + rng() % 255);
        break;
      case 1: {  // cut the chunk short
        const uint64_t cut = 1 + rng() % (length - 1);
        bad.bytes.erase(bad.bytes.begin() + static_cast<std::ptrdiff_t>(start + length - cut), bad.bytes.begin() + static_cast<std::ptrdiff_t>(start + length));
        for (uint64_t i = victim + 1; i <= chunks; ++i) bad.offsets[i] -= cut;
        break;
      }
      case 2:  // any byte at all, header included
        bad.bytes[start + rng() % length] = static_cast<uint8_t>(rng());
        break;
      default:  // a block's size prefix rewritten
        bad.bytes[start + 12 + rng() % 3] = static_cast<uint8_t>(rng());
        break;
    }
    const Decoded g = decode_on(*registry_, costs_, GetParam(), dt, bad, elements);
    const Decoded c = decode_on(*registry_, costs_, "cpu", dt, bad, elements);
    const std::string where = "trial " + std::to_string(trial) + " chunk " + std::to_string(victim);
    if (c.status == TM_OK && g.status != TM_OK && g.message.find("offset 0") != std::string::npos) {
      ++offset_zero;
      continue;
    }
    ASSERT_EQ(g.status, c.status) << where << ": " << GetParam() << " says '" << g.message << "', the CPU '" << c.message << "'";
    if (c.status == TM_OK) {
      ASSERT_EQ(g.bytes, c.bytes) << where;
      continue;
    }
    ++refused;
    ASSERT_EQ(c.status, TM_ERR_INVALID_ARGUMENT) << c.message;
    ASSERT_EQ(c.message.rfind("chunk ", 0), 0u) << c.message;
    const std::string chunk_named = c.message.substr(0, c.message.find(':') + 1);  // "chunk <i>:"
    ASSERT_EQ(g.message.rfind(chunk_named, 0), 0u) << where << ": " << g.message << " vs " << c.message;
  }
  EXPECT_GT(refused, 200) << "most damage is detected";
  RecordProperty("offset_zero_refusals", offset_zero);
}

// One u8 chunk of 64 elements in one block whose LZ4 stream is written by hand.
Chunks hand_made(const std::vector<uint8_t>& lz4) {
  Chunks c;
  c.bytes = {0, 0, 0, 0, 0, 0, 0, 64, 0, 0, 0, 64, 0, 0, 0, static_cast<uint8_t>(lz4.size())};
  c.bytes.insert(c.bytes.end(), lz4.begin(), lz4.end());
  c.offsets.push_back(c.bytes.size());
  return c;
}

// LZ4 streams at the edges of the format, as liblz4 1.9 draws them: a match must end 5 bytes before the
// output's end, a literal run that comes within 12 bytes of it must be the last, a match may not reach
// before the output's start. The backend accepts and refuses exactly what the CPU does.
TEST_P(GpuParity, DecodeBitshuffleLz4FollowsLz4sEdgeRules) {
  auto stream = [&](uint8_t token, const std::vector<uint8_t>& tail) {
    std::vector<uint8_t> s = {token, 'a', 'b', 'c', 'd', 4, 0};  // 4 literals, a match at offset 4
    for (uint8_t b : tail) s.push_back(b);
    return s;
  };
  const std::vector<uint8_t> twelve(12, 'x'), five(5, 'y'), four(4, 'z');
  struct Case {
    const char* what;
    std::vector<uint8_t> lz4;
    bool valid;
  } cases[] = {
      {"match to 52, 12 last literals", [&] { auto s = stream(0x4f, {29, 0xc0}); s.insert(s.end(), twelve.begin(), twelve.end()); return s; }(), true},
      {"match to 59, 5 last literals", [&] { auto s = stream(0x4f, {36, 0x50}); s.insert(s.end(), five.begin(), five.end()); return s; }(), true},
      {"match to 60, 4 last literals", [&] { auto s = stream(0x4f, {37, 0x40}); s.insert(s.end(), four.begin(), four.end()); return s; }(), false},
      {"match to the end", stream(0x4f, {41}), false},
      {"match before the start", {0x40, 'a', 'b', 'c', 'd', 9, 0, 0xc0, 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x'}, false},
      {"literals near the end that are not the last", {0xf0, 41, 0}, false},
  };
  for (const Case& k : cases) {
    const Chunks in = hand_made(k.lz4);
    const Decoded g = decode_on(*registry_, costs_, GetParam(), DType::U8, in, 64);
    const Decoded c = decode_on(*registry_, costs_, "cpu", DType::U8, in, 64);
    EXPECT_EQ(c.status == TM_OK, k.valid) << k.what << ": the CPU says " << c.message;
    EXPECT_EQ(g.status, c.status) << k.what << ": " << g.message << " vs " << c.message;
    if (g.status == TM_OK && c.status == TM_OK) {
      EXPECT_EQ(g.bytes, c.bytes) << k.what;
    }
  }
  // Offset 0: liblz4 copies what its buffer held; the device refuses, saying why.
  auto zero = stream(0x4f, {29, 0xc0});
  zero[5] = 0;
  zero.insert(zero.end(), twelve.begin(), twelve.end());
  const Decoded g = decode_on(*registry_, costs_, GetParam(), DType::U8, hand_made(zero), 64);
  EXPECT_EQ(g.status, TM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(g.message.find("chunk 0: block 0 (chunk byte 12): LZ4 match offset 0"), std::string::npos) << g.message;
}

TEST_P(GpuParity, DecodeBitshuffleLz4MalformedCallsAreRefused) {
  const DType dt = DType::U8;
  const auto data = frames(dt, 2, 64, 3);
  Chunks in = encode(data, dt, 2, 64, 0);
  in.offsets[1] = in.offsets[2] + 1;  // chunk 1 would start past the input and end before it starts
  const Decoded g = decode_on(*registry_, costs_, GetParam(), dt, in, 64);
  EXPECT_EQ(g.status, TM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(g.message.find("never decrease (chunk 1)"), std::string::npos) << g.message;
  const Decoded wrong_count = decode_on(*registry_, costs_, GetParam(), dt, encode(data, dt, 2, 64, 0), 63);
  EXPECT_EQ(wrong_count.status, TM_ERR_INVALID_ARGUMENT) << "header says 64 bytes, the call 63 per chunk";
  EXPECT_NE(wrong_count.message.find("chunk 0: header (byte 0) says 64 uncompressed bytes"), std::string::npos)
      << wrong_count.message;
}


// Elements whose bits are all ones become 0 and are counted; listed elements become 0 in every chunk; the
// backend gives the CPU's bytes and count, and both agree with the data.
TEST_P(GpuParity, DecodeBitshuffleLz4MasksLikeTheCpu) {
  ScopedChunk chunk("8192");
  for (DType dt : {DType::U8, DType::U16, DType::U32}) {
    const uint64_t chunks = 7, elements = 1031;
    std::vector<uint8_t> data = frames(dt, chunks, elements, 3 + dtype_size(dt));
    const size_t w = dtype_size(dt);
    for (uint64_t i = 0; i < chunks * elements; i += 37) std::memset(&data[i * w], 0xFF, w);  // sentinels
    const std::vector<uint32_t> bad = {0, 5, 600, 1030};
    uint64_t expected_ones = 0;
    std::vector<uint8_t> expected = data;
    for (uint64_t i = 0; i < chunks * elements; ++i) {
      bool ones = true;
      for (size_t b = 0; b < w; ++b) ones = ones && data[i * w + b] == 0xFF;
      if (ones) ++expected_ones, std::memset(&expected[i * w], 0, w);
    }
    for (uint64_t c = 0; c < chunks; ++c)
      for (uint32_t e : bad) std::memset(&expected[(c * elements + e) * w], 0, w);
    const Chunks in = encode(data, dt, chunks, elements, 0);
    const Masked g = decode_masked_on(*registry_, costs_, GetParam(), dt, in, elements, bad);
    const Masked c = decode_masked_on(*registry_, costs_, "cpu", dt, in, elements, bad);
    ASSERT_EQ(c.decoded.status, TM_OK) << c.decoded.message;
    ASSERT_EQ(g.decoded.status, TM_OK) << g.decoded.message;
    EXPECT_EQ(c.decoded.bytes, expected) << dtype_name(dt);
    EXPECT_EQ(g.decoded.bytes, expected) << dtype_name(dt);
    EXPECT_EQ(c.all_ones, expected_ones) << dtype_name(dt);
    EXPECT_EQ(g.all_ones, expected_ones) << dtype_name(dt);
    EXPECT_GT(expected_ones, chunks * elements / 40);
  }
}

// A damaged chunk's index comes back in failed_chunk (the loader names its frame from it, not from the text);
// a listed element outside a chunk is refused by both with the same words.
TEST_P(GpuParity, DecodeBitshuffleLz4ReportsTheFailedChunkAndRefusesListsOutsideAChunk) {
  const DType dt = DType::U16;
  const auto data = frames(dt, 5, 300, 9);
  Chunks in = encode(data, dt, 5, 300, 0);
  in.bytes[in.offsets[3] + 13] ^= 0x7F;  // chunk 3's first block's size prefix
  const Masked g = decode_masked_on(*registry_, costs_, GetParam(), dt, in, 300, {});
  const Masked c = decode_masked_on(*registry_, costs_, "cpu", dt, in, 300, {});
  ASSERT_EQ(c.decoded.status, TM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(g.decoded.status, TM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(c.failed_chunk, 3u) << c.decoded.message;
  EXPECT_EQ(g.failed_chunk, 3u) << g.decoded.message;
  const Masked g_out = decode_masked_on(*registry_, costs_, GetParam(), dt, encode(data, dt, 5, 300, 0), 300, {12, 300});
  const Masked c_out = decode_masked_on(*registry_, costs_, "cpu", dt, encode(data, dt, 5, 300, 0), 300, {12, 300});
  EXPECT_EQ(g_out.decoded.status, TM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(g_out.decoded.message.find("zero_elements[1] = 300 lies outside a chunk of 300 elements"), std::string::npos)
      << g_out.decoded.message;
  EXPECT_NE(c_out.decoded.message.find("zero_elements[1] = 300 lies outside a chunk of 300 elements"), std::string::npos)
      << c_out.decoded.message;
  EXPECT_EQ(g_out.failed_chunk, UINT64_MAX) << "no chunk failed";
}

// Frames decoded into device memory (allocate + output_buffer) are read there by stem.frame_sums and
// stem.pattern_reduce (input_buffer, no host input): the sums equal the CPU's over the host-decoded frames.
// Device outputs are refused where the contract has none: another op, the CPU, an unaligned offset.
TEST_P(GpuParity, DecodedFramesStayOnTheDeviceForTheNextOps) {
  const tm_backend_v1& table = *backend_->table;
  ASSERT_TRUE(backend_->can_allocate) << GetParam() << " has no allocate";
  const DType dt = DType::U16;
  const uint64_t chunks = 6, pixels = 24 * 20;
  std::vector<uint8_t> data = frames(dt, chunks, pixels, 21);
  for (uint64_t i = 0; i < chunks * pixels; i += 53) std::memset(&data[i * 2], 0xFF, 2);
  const std::vector<uint32_t> bad = {7, 100};
  const Chunks in = encode(data, dt, chunks, pixels, 0);
  uint64_t buffer = 0;
  tm_message msg{};
  ASSERT_EQ(table.allocate(0, chunks * pixels * 2, &buffer, &msg), TM_OK) << msg.text;
  const Masked on_device = decode_masked_on(*registry_, costs_, GetParam(), dt, in, pixels, bad, buffer);
  ASSERT_EQ(on_device.decoded.status, TM_OK) << on_device.decoded.message;
  const Masked host = decode_masked_on(*registry_, costs_, "cpu", dt, in, pixels, bad);
  ASSERT_EQ(host.decoded.status, TM_OK);
  EXPECT_EQ(on_device.all_ones, host.all_ones);

  const std::vector<uint64_t> offsets = {0, 3};
  const std::vector<uint32_t> list = {1, 40, 479};
  const tm_stem_frame_sums_params_v1 sums{pixels, 20, 1, offsets.data(), list.data(), TM_STEM_ALL_PIXELS, 0};
  const tm_stem_pattern_params_v1 pattern{pixels};
  auto run_op = [&](const std::string& name, tm_op op, const void* params, uint64_t params_size, std::vector<uint8_t>* out,
                    uint64_t input_buffer) {
    OpRequest r;
    r.op = op, r.dtype = dt, r.elements = chunks * pixels, r.bytes = r.elements * 2;
    Constraints c;
    c.strict_backend = name;
    const Placement p = Planner(*registry_, costs_, c).place(r);
    tm_kernel_call_v1 call{};
    call.struct_size = sizeof call;
    call.op = op, call.kernel_index = p.kernel_index, call.device_index = p.device_index, call.dtype = TM_DTYPE_U16;
    call.input = input_buffer ? nullptr : host.decoded.bytes.data(), call.element_count = r.elements;
    call.params = params, call.params_size = params_size;
    call.output = out->data(), call.output_size = out->size(), call.threads = 1;
    call.input_buffer = input_buffer;
    tm_message m{};
    const tm_status st = p.backend_ref->table->run(&call, &m);
    EXPECT_EQ(st, TM_OK) << name << " " << op_name(op) << ": " << m.text;
  };
  std::vector<uint8_t> sums_gpu(chunks * (TM_STEM_FRAME_SUMS_FIXED + 1) * 8), sums_cpu = sums_gpu;
  std::vector<uint8_t> pattern_gpu(pixels * 12, 0), pattern_cpu = pattern_gpu;
  run_op(GetParam(), TM_OP_STEM_FRAME_SUMS, &sums, sizeof sums, &sums_gpu, buffer);
  run_op("cpu", TM_OP_STEM_FRAME_SUMS, &sums, sizeof sums, &sums_cpu, 0);
  run_op(GetParam(), TM_OP_STEM_PATTERN_REDUCE, &pattern, sizeof pattern, &pattern_gpu, buffer);
  run_op("cpu", TM_OP_STEM_PATTERN_REDUCE, &pattern, sizeof pattern, &pattern_cpu, 0);
  EXPECT_EQ(sums_gpu, sums_cpu);
  EXPECT_EQ(pattern_gpu, pattern_cpu);

  // Refusals: another op writing to a device buffer; the CPU asked for a device output; an unaligned offset.
  tm_kernel_call_v1 call{};
  call.struct_size = sizeof call;
  call.op = TM_OP_STEM_PATTERN_REDUCE, call.kernel_index = 0, call.dtype = TM_DTYPE_U16;
  for (uint32_t k = 0; k < table.kernel_count(); ++k) {
    tm_kernel_cap_v1 cap{};
    table.kernel_info(k, &cap);
    if (cap.op == TM_OP_STEM_PATTERN_REDUCE) call.kernel_index = k;
  }
  call.input_buffer = buffer, call.element_count = chunks * pixels, call.params = &pattern, call.params_size = sizeof pattern;
  call.output_buffer = buffer, call.threads = 1;
  EXPECT_EQ(table.run(&call, &msg), TM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(msg.text).find("does not write to a device buffer"), std::string::npos) << msg.text;
  const Masked cpu_device = decode_masked_on(*registry_, costs_, "cpu", dt, in, pixels, bad, buffer);
  EXPECT_EQ(cpu_device.decoded.status, TM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(cpu_device.decoded.message.find("no device buffers"), std::string::npos) << cpu_device.decoded.message;
  table.release(buffer);
  const Masked released = decode_masked_on(*registry_, costs_, GetParam(), dt, in, pixels, bad, buffer);
  EXPECT_EQ(released.decoded.status, TM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(released.decoded.message.find("is not a buffer on device 0"), std::string::npos) << released.decoded.message;
}

}  // namespace
}  // namespace tmorph::gpu_test
