// WGSL decoder of HDF5 filter 32008 chunks (bitshuffle + LZ4) as Dectris detectors store them, one chunk per frame,
// for a window of frames (GET …/chunks; decode.ts drives it). The chunk layout (integers big-endian; the project's
// CPU decoder, src/support/bitshuffle_lz4_decode.h, is the reference):
//   [0, 8) the chunk's uncompressed bytes, [8, 12) the block size in BYTES (a multiple of 8 elements); then for each
//   block of the elements rounded down to a multiple of 8 (full blocks, then one partial block) a 4-byte compressed
//   length and that many bytes of one LZ4 block, whose decompressed bytes are the block bit-transposed; then the
//   last (elements % 8) elements, stored raw. A block of m elements of s bytes is 8·s rows of m/8 bytes: row 8·b + i
//   holds bit i of byte b (little-endian) of every element, element j's bit in row byte j/8, bit j%8.
// Chunks with filter "none" are one frame's bytes.
//
// Three passes, each its own entry point:
//   scan_main    one invocation per chunk: checks the header (bytes == frame bytes, block size == the manifest's),
//                walks the size prefixes and writes each LZ4 block's place (input offset, length, output offset and
//                bytes) into `table`; checks that exactly the raw tail remains.
//   lz4_main     one invocation per LZ4 block: decompresses it into `scratch` (the chunk's shuffled bytes, at the
//                chunk's index × stride) under liblz4 1.9's rules as the CPU and the CUDA kernel apply them (a literal
//                run within 12 bytes of the output's end or 8 of the input's ends the block exactly; a match ends 5
//                bytes before the output's end), refusing literals or a length past the block's end, a match offset
//                of 0 (liblz4 would copy stale bytes) or before the block's start, an output past the block's bytes,
//                a block short of its bytes.
//   unshuffle_main  one invocation per output u32 word: the bit transpose back (each row's byte read once for the
//                word's elements when they share an 8-element group; the tail and "none" chunks copied),
//                then the products' masking (the sentinel value and the listed bad pixels zeroed), packed little-endian
//                as the page's block (frames back to back, the last word zero-padded).
// Any failure sets the chunk's `status` word (atomicMax of an error code, ERR_* below; 0 = decoded) and stops
// that chunk's later work; the host refuses a window with any nonzero status and names the frame. Nothing is
// read or written outside the buffers' given ranges: every read of `src` is bounded by the chunk's bytes, every
// write of `scratch` by its block's bytes.
export const BITSHUFFLE_LZ4_WGSL = /* wgsl */ `
struct Chunk {
  src_offset: u32,   // byte offset of the chunk in src
  src_bytes: u32,    // its stored bytes
  codec: u32,        // 1 = bitshuffle_lz4, 0 = none (the manifest's filter)
  block_bytes: u32,  // bitshuffle: the block size in bytes (the manifest's; the header must agree)
  table_base: u32,   // its first entry in table
  blocks: u32,       // its LZ4 blocks (from the frame's elements and block_bytes)
  pad0: u32,
  pad1: u32,
}
struct Block {
  src_offset: u32,     // byte offset of the LZ4 block in src
  src_bytes: u32,      // its compressed bytes
  out_offset: u32,     // byte offset of its decompressed (shuffled) bytes in scratch
  out_bytes: u32,      // its decompressed bytes (a multiple of 8)
  chunk: u32,
  pad0: u32,
  pad1: u32,
  pad2: u32,
}
struct Params {
  chunks: u32,        // frames (chunks) in the window
  blocks: u32,        // LZ4 blocks in the window
  frame_bytes: u32,
  stride: u32,        // scratch bytes per chunk (frame_bytes rounded up to 4)
  element_size: u32,  // 1, 2 or 4
  elements: u32,      // elements per frame
  out_words: u32,     // u32 words of the output (ceil(chunks × frame_bytes / 4))
  sentinel: u32,      // the value the products zero (the dtype's maximum)
  row_threads: u32,   // invocations per row of a 2-D dispatch
  mask: u32,          // 1: zero the sentinel and the bad pixels (as the products see the frames)
  pad0: u32,
  pad1: u32,
}

const ERR_RAW_SIZE: u32 = 1u;        // a "none" chunk whose bytes are not one frame's
const ERR_HEADER_SHORT: u32 = 2u;    // fewer than 12 bytes
const ERR_TOTAL: u32 = 3u;           // header (byte 0) total != the frame's bytes
const ERR_BLOCK_SIZE: u32 = 4u;      // header (byte 8) block size != the manifest's
const ERR_PREFIX: u32 = 5u;          // a size prefix truncated
const ERR_LENGTH: u32 = 6u;          // a block's length past the chunk's end
const ERR_TRAILING: u32 = 7u;        // the bytes after the blocks are not the raw tail
const ERR_LZ4_LITERALS: u32 = 8u;    // literals past the block's input
const ERR_LZ4_OFFSET: u32 = 9u;      // a match offset of 0 or before the block's start
const ERR_LZ4_OVERRUN: u32 = 10u;    // output past the block's decompressed bytes
const ERR_LZ4_TRUNCATED: u32 = 11u;  // the block ends inside a sequence (or is empty)
const ERR_LZ4_SHORT: u32 = 12u;      // the block decoded to fewer bytes than it must
const ERR_LZ4_END_RULES: u32 = 13u;  // a match reaching the output's last 5 bytes

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read> chunks: array<Chunk>;
@group(0) @binding(2) var<storage, read_write> table: array<Block>;
@group(0) @binding(3) var<storage, read_write> scratch: array<u32>;
@group(0) @binding(4) var<storage, read_write> status: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read_write> out: array<u32>;
@group(0) @binding(6) var<uniform> params: Params;
@group(0) @binding(7) var<storage, read> bad: array<u32>;  // one bit per detector pixel (row-major)

fn src_byte(i: u32) -> u32 {
  return (src[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
}
fn be32(i: u32) -> u32 {
  return (src_byte(i) << 24u) | (src_byte(i + 1u) << 16u) | (src_byte(i + 2u) << 8u) | src_byte(i + 3u);
}
fn fail(chunk: u32, code: u32) {
  atomicMax(&status[chunk], code);
}
fn index_of(gid: vec3<u32>) -> u32 {
  return gid.x + gid.y * params.row_threads;
}

@compute @workgroup_size(64)
fn scan_main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let c = index_of(gid);
  if (c >= params.chunks) { return; }
  let ch = chunks[c];
  if (ch.codec == 0u) {
    if (ch.src_bytes != params.frame_bytes) { fail(c, ERR_RAW_SIZE); }
    return;
  }
  let s = ch.src_offset;
  let n = ch.src_bytes;
  if (n < 12u) { fail(c, ERR_HEADER_SHORT); return; }
  if (be32(s) != 0u || be32(s + 4u) != params.frame_bytes) { fail(c, ERR_TOTAL); return; }
  if (be32(s + 8u) != ch.block_bytes) { fail(c, ERR_BLOCK_SIZE); return; }
  let es = params.element_size;
  let whole = params.elements - params.elements % 8u;
  let block_elements = ch.block_bytes / es;
  var pos = 12u;
  var done = 0u;
  for (var k = 0u; k < ch.blocks; k++) {
    let m = min(block_elements, whole - done);
    if (n - pos < 4u) { fail(c, ERR_PREFIX); return; }
    let cs = be32(s + pos);
    pos += 4u;
    if (cs > n - pos) { fail(c, ERR_LENGTH); return; }
    table[ch.table_base + k] = Block(s + pos, cs, c * params.stride + done * es, m * es, c, 0u, 0u, 0u);
    pos += cs;
    done += m;
  }
  if (n - pos != (params.elements - whole) * es) { fail(c, ERR_TRAILING); }
}

// The output of one LZ4 block, written a word at a time: bytes [base, base + op) are out, the last incomplete word
// (bytes [op & ~3, op)) still in pending.
struct Writer {
  base: u32,
  op: u32,
  pending: u32,
}

fn out_byte(w: ptr<function, Writer>, j: u32) -> u32 {  // output byte j (< op) of the block
  if ((j >> 2u) == ((*w).op >> 2u)) { return ((*w).pending >> ((j & 3u) * 8u)) & 0xffu; }
  let a = (*w).base + j;
  return (scratch[a >> 2u] >> ((a & 3u) * 8u)) & 0xffu;
}
fn put_byte(w: ptr<function, Writer>, b: u32) {
  (*w).pending |= b << (((*w).op & 3u) * 8u);
  (*w).op += 1u;
  if (((*w).op & 3u) == 0u) {
    scratch[((*w).base + (*w).op - 4u) >> 2u] = (*w).pending;
    (*w).pending = 0u;
  }
}

@compute @workgroup_size(64)
fn lz4_main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = index_of(gid);
  if (b >= params.blocks) { return; }
  let e = table[b];
  let c = e.chunk;
  if (atomicLoad(&status[c]) != 0u) { return; }
  // ip counts the block's compressed bytes (0 .. cs), op its output bytes (0 .. raw), as the CPU's liblz4 1.9 and
  // the CUDA kernel (backends/gpu/gpu_kernels.inl, lz4_decode_block) apply the format's rules.
  let s0 = e.src_offset;
  let cs = e.src_bytes;
  let raw = e.out_bytes;
  var ip = 0u;
  var w = Writer(e.out_offset, 0u, 0u);
  if (cs == 0u) { fail(c, ERR_LZ4_TRUNCATED); return; }
  loop {
    if (ip >= cs) { fail(c, ERR_LZ4_TRUNCATED); return; }
    let token = src_byte(s0 + ip);
    ip += 1u;
    var lit = token >> 4u;
    if (lit == 15u) {
      if (ip + 15u >= cs) { fail(c, ERR_LZ4_TRUNCATED); return; }
      loop {
        let x = src_byte(s0 + ip);
        ip += 1u;
        lit += x;
        if (ip + 15u > cs) { fail(c, ERR_LZ4_TRUNCATED); return; }
        if (x != 255u) { break; }
      }
    }
    // A literal run reaching within 12 bytes of the output's end or 8 of the input's ends the block exactly.
    if (lit > raw || w.op + lit + 12u > raw || ip + lit + 8u > cs) {
      if (lit > cs - ip || ip + lit != cs) { fail(c, ERR_LZ4_LITERALS); return; }
      if (lit > raw - w.op) { fail(c, ERR_LZ4_OVERRUN); return; }
      for (var k = 0u; k < lit; k++) { put_byte(&w, src_byte(s0 + ip + k)); }
      break;
    }
    for (var k = 0u; k < lit; k++) { put_byte(&w, src_byte(s0 + ip + k)); }
    ip += lit;
    let offset = src_byte(s0 + ip) | (src_byte(s0 + ip + 1u) << 8u);  // ip + 8 <= cs: both bytes are the block's
    if (offset == 0u || offset > w.op) { fail(c, ERR_LZ4_OFFSET); return; }
    ip += 2u;
    var mlen = token & 15u;
    if (mlen == 15u) {
      loop {
        let x = src_byte(s0 + ip);
        ip += 1u;
        mlen += x;
        if (ip + 4u > cs || mlen > raw) { fail(c, ERR_LZ4_TRUNCATED); return; }
        if (x != 255u) { break; }
      }
    }
    mlen += 4u;
    if (w.op + mlen + 5u > raw) { fail(c, ERR_LZ4_END_RULES); return; }  // a match ends 5 bytes before the end
    let match_start = w.op - offset;
    for (var k = 0u; k < mlen; k++) { put_byte(&w, out_byte(&w, match_start + k)); }
  }
  if (w.op != raw) { fail(c, ERR_LZ4_SHORT); return; }
  // raw is a multiple of 8: put_byte has written every word.
}

// Element j (< elements) of chunk c, its element_size bytes little-endian in a u32.
fn element(c: u32, j: u32) -> u32 {
  let ch = chunks[c];
  let es = params.element_size;
  let whole = params.elements - params.elements % 8u;
  var v = 0u;
  if (ch.codec == 0u || j >= whole) {
    let at = select(ch.src_offset + j * es, ch.src_offset + ch.src_bytes - (params.elements - j) * es, ch.codec != 0u);
    for (var k = 0u; k < es; k++) { v |= src_byte(at + k) << (8u * k); }
    return v;
  }
  let be = ch.block_bytes / es;
  let blk = j / be;
  let jj = j - blk * be;
  let m = min(be, whole - blk * be);
  let row_bytes = m / 8u;
  let base = c * params.stride + blk * ch.block_bytes + jj / 8u;
  let bit = jj & 7u;
  for (var k = 0u; k < es; k++) {
    var b8 = 0u;
    for (var i = 0u; i < 8u; i++) {
      let a = base + (8u * k + i) * row_bytes;
      b8 |= ((scratch[a >> 2u] >> ((a & 3u) * 8u + bit)) & 1u) << i;
    }
    v |= b8 << (8u * k);
  }
  return v;
}

// The products' masking of element j's value v.
fn masked(v: u32, j: u32) -> u32 {
  if (params.mask != 0u && (v == params.sentinel || ((bad[j >> 5u] >> (j & 31u)) & 1u) != 0u)) { return 0u; }
  return v;
}

@compute @workgroup_size(64)
fn unshuffle_main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let wi = index_of(gid);
  if (wi >= params.out_words) { return; }
  let es = params.element_size;
  let per = 4u / es;  // elements per output word
  let total = params.chunks * params.frame_bytes;
  let g0 = wi * 4u;
  let c = g0 / params.frame_bytes;
  let j0 = (g0 - c * params.frame_bytes) / es;
  let whole = params.elements - params.elements % 8u;
  let g_last = g0 + (per - 1u) * es;
  // The common case: the word's elements are one chunk's, bit-shuffled, in one group of 8: their bits share each
  // row's byte, so each of the 8·es rows is read once for all of them.
  if (g_last < total && g_last / params.frame_bytes == c && chunks[c].codec != 0u && j0 + per - 1u < whole &&
      (j0 >> 3u) == ((j0 + per - 1u) >> 3u)) {
    if (atomicLoad(&status[c]) != 0u) { out[wi] = 0u; return; }  // refused by the host: zeros, never read
    let ch = chunks[c];
    let be = ch.block_bytes / es;
    let blk = j0 / be;
    let jj = j0 - blk * be;
    let row_bytes = min(be, whole - blk * be) / 8u;
    let base = c * params.stride + blk * ch.block_bytes + jj / 8u;
    let bit = jj & 7u;
    var v0 = 0u;
    var v1 = 0u;
    var v2 = 0u;
    var v3 = 0u;
    for (var r = 0u; r < 8u * es; r++) {  // row r holds bit r % 8 of byte r / 8: bit r of the value
      let a = base + r * row_bytes;
      let row = scratch[a >> 2u] >> ((a & 3u) * 8u + bit);  // element j0 + t's bit at bit t (t < per)
      v0 |= (row & 1u) << r;
      v1 |= ((row >> 1u) & 1u) << r;
      v2 |= ((row >> 2u) & 1u) << r;
      v3 |= ((row >> 3u) & 1u) << r;
    }
    var word = masked(v0, j0);
    if (es == 1u) {
      word |= (masked(v1, j0 + 1u) << 8u) | (masked(v2, j0 + 2u) << 16u) | (masked(v3, j0 + 3u) << 24u);
    } else if (es == 2u) {
      word |= masked(v1, j0 + 1u) << 16u;
    }
    out[wi] = word;
    return;
  }
  // Elements of two frames, the raw tail, unfiltered chunks: element by element.
  var word = 0u;
  for (var t = 0u; t < per; t++) {
    let g = g0 + t * es;
    if (g >= total) { break; }
    let ct = g / params.frame_bytes;
    if (atomicLoad(&status[ct]) != 0u) { continue; }  // refused by the host: zeros, never read
    let j = (g - ct * params.frame_bytes) / es;
    word |= masked(element(ct, j), j) << (8u * t * es);
  }
  out[wi] = word;
}
`;
