// Shared layout of the three stem.ssb_overlap passes (vk_kernels.cpp writes it; op_contracts.h has the
// math). Aux float section F (vec2 = complex64): e^{iχ(ν)} [N], inverse-transform twiddles e^{+2πi m/R} [R]
// and e^{+2πi m/C} [C], then the batch's row factors [nb × R] and column factors [nb × C].
layout(push_constant) uniform Push {
  uint nb;      // bright-field pixels in this batch
  uint rows;    // R
  uint cols;    // C
  uint stride;  // complex values from one pixel's half-plane spectrum to the next (input)
  uint groups;  // workgroups launched (grid-stride loops)
} pc;

uint n_positions() { return pc.rows * pc.cols; }
uint f_echi(uint q) { return q; }
uint f_tw_rows(uint m) { return n_positions() + m; }
uint f_tw_cols(uint m) { return n_positions() + pc.rows + m; }
uint f_row_factor(uint b, uint i) { return n_positions() + pc.rows + pc.cols + b * pc.rows + i; }
uint f_col_factor(uint b, uint j) { return n_positions() + pc.rows + pc.cols + pc.nb * pc.rows + b * pc.cols + j; }

vec2 cmul(vec2 a, vec2 b) { return vec2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }
