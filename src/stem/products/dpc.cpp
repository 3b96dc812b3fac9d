#include "stem/products/dpc.h"

#include <fftw3.h>

#include <cmath>
#include <complex>
#include <mutex>

#include "core/json_number.h"
#include "support/fftfreq.h"
#include "support/fftw_lock.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

// A 2-D complex DFT through FFTW (sign -1 forward, +1 backward, unnormalised), in place on `data`.
void dft2(std::vector<std::complex<double>>& data, uint64_t rows, uint64_t cols, int sign) {
  fftw_complex* buf = fftw_alloc_complex(rows * cols);
  fftw_plan plan;
  {
    std::lock_guard<std::mutex> g(fftw_planner_mutex());
    plan = fftw_plan_dft_2d(static_cast<int>(rows), static_cast<int>(cols), buf, buf, sign, FFTW_ESTIMATE);
  }
  for (uint64_t i = 0; i < rows * cols; ++i) buf[i][0] = data[i].real(), buf[i][1] = data[i].imag();
  fftw_execute(plan);
  for (uint64_t i = 0; i < rows * cols; ++i) data[i] = {buf[i][0], buf[i][1]};
  {
    std::lock_guard<std::mutex> g(fftw_planner_mutex());
    fftw_destroy_plan(plan);
  }
  fftw_free(buf);
}

void subtract_mean(std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  const double mean = v.empty() ? 0 : s / static_cast<double>(v.size());
  for (double& x : v) x -= mean;
}

// ⟨K²⟩, ⟨D²⟩, ⟨KD⟩ over interior positions (central differences).
void moments(const ScanField& f, double* kk, double* dd, double* kd) {
  if (f.rows < 3 || f.cols < 3)
    throw Error(ErrorKind::InvalidArgument, "DPC rotation: needs a scan of at least 3 x 3 positions, have " + std::to_string(f.rows) +
                                                " x " + std::to_string(f.cols));
  const uint64_t C = f.cols;
  double skk = 0, sdd = 0, skd = 0;
  for (uint64_t r = 1; r + 1 < f.rows; ++r)
    for (uint64_t c = 1; c + 1 < f.cols; ++c) {
      const double du_dr = (f.u[(r + 1) * C + c] - f.u[(r - 1) * C + c]) / 2, du_dc = (f.u[r * C + c + 1] - f.u[r * C + c - 1]) / 2;
      const double dv_dr = (f.v[(r + 1) * C + c] - f.v[(r - 1) * C + c]) / 2, dv_dc = (f.v[r * C + c + 1] - f.v[r * C + c - 1]) / 2;
      const double k = dv_dr - du_dc, d = du_dr + dv_dc;
      skk += k * k, sdd += d * d, skd += k * d;
    }
  const double n = static_cast<double>((f.rows - 2) * (f.cols - 2));
  *kk = skk / n, *dd = sdd / n, *kd = skd / n;
}

}  // namespace

ScanField center_of_mass(const ProductResult& r) {
  ScanField f;
  f.rows = r.scan_shape[0], f.cols = r.scan_shape[1];
  f.u.resize(r.positions), f.v.resize(r.positions);
  for (uint64_t p = 0; p < r.positions && r.floating; ++p) {
    const double s = r.com_weight_f[p];
    f.u[p] = s != 0.0 ? r.com_row_f[p] / s : 0.0;
    f.v[p] = s != 0.0 ? r.com_col_f[p] / s : 0.0;
  }
  for (uint64_t p = 0; p < r.positions && !r.floating; ++p) {
    const double s = static_cast<double>(r.com_weight[p]);
    f.u[p] = r.com_weight[p] ? static_cast<double>(r.com_row[p]) / s : 0.0;
    f.v[p] = r.com_weight[p] ? static_cast<double>(r.com_col[p]) / s : 0.0;
  }
  subtract_mean(f.u);
  subtract_mean(f.v);
  return f;
}

ScanField rotate_field(const ScanField& f, double angle, bool transpose) {
  ScanField out = f;
  const double c = std::cos(angle), s = std::sin(angle);
  for (size_t i = 0; i < f.u.size(); ++i) {
    const double u = transpose ? f.v[i] : f.u[i], v = transpose ? f.u[i] : f.v[i];
    out.u[i] = u * c - v * s;
    out.v[i] = u * s + v * c;
  }
  return out;
}

void curl_div(const ScanField& f, double* curl2, double* div2) {
  double kd = 0;
  moments(f, curl2, div2, &kd);
}

DpcRotation find_dpc_rotation(const ScanField& f) {
  DpcRotation best[2];
  for (int t = 0; t < 2; ++t) {
    double kk = 0, dd = 0, kd = 0;
    moments(t ? rotate_field(f, 0, true) : f, &kk, &dd, &kd);
    const double m = (kk + dd) / 2, a = (kk - dd) / 2, b = kd;
    double theta = (std::atan2(b, a) + M_PI) / 2;  // in (0, π]
    if (theta >= M_PI) theta -= M_PI;
    best[t].angle = theta;
    best[t].transpose = t == 1;
    best[t].curl2 = std::max(0.0, m - std::hypot(a, b));
  }
  DpcRotation out = best[1].curl2 < best[0].curl2 ? best[1] : best[0];
  out.curl2_other = (out.transpose ? best[0] : best[1]).curl2;
  double curl2 = 0;
  curl_div(rotate_field(f, out.angle, out.transpose), &curl2, &out.div2);
  out.curl2 = curl2;
  return out;
}

ResolvedDpcRotation resolve_dpc_rotation(const ScanField& com, const DpcRotationRequest& request) {
  ResolvedDpcRotation r;
  if (!request.angle_deg) {
    r.rotation = find_dpc_rotation(com);
    r.source = "found (minimum mean squared curl)", r.found = true;
  } else {
    r.rotation.angle = *request.angle_deg * M_PI / 180, r.rotation.transpose = request.transpose;
    curl_div(rotate_field(com, r.rotation.angle, r.rotation.transpose), &r.rotation.curl2, &r.rotation.div2);
    r.source = "given";
  }
  r.rotated = rotate_field(com, r.rotation.angle, r.rotation.transpose);
  return r;
}

nlohmann::json to_json(const ResolvedDpcRotation& r) {
  nlohmann::json j = {{"source", r.source},
                      {"angle_deg", r.rotation.angle * 180 / M_PI},
                      {"angle_rad", r.rotation.angle},
                      {"transpose", r.rotation.transpose},
                      {"mean_curl2", json_number(r.rotation.curl2)},
                      {"mean_div2", json_number(r.rotation.div2)}};
  if (r.found) j["curl2_other_transpose"] = json_number(r.rotation.curl2_other);
  return j;
}

std::vector<double> integrate_dpc(const ScanField& g) {
  const uint64_t R = g.rows, C = g.cols;
  std::vector<std::complex<double>> gu(R * C), gv(R * C);
  for (uint64_t i = 0; i < R * C; ++i) gu[i] = g.u[i], gv[i] = g.v[i];
  dft2(gu, R, C, FFTW_FORWARD);
  dft2(gv, R, C, FFTW_FORWARD);
  std::vector<std::complex<double>> phi(R * C);
  const std::complex<double> k(0, -0.25);
  for (uint64_t i = 0; i < R; ++i)
    for (uint64_t j = 0; j < C; ++j) {
      const double nr = fftfreq(i, R), nc = fftfreq(j, C), n2 = nr * nr + nc * nc;
      phi[i * C + j] = n2 == 0 ? std::complex<double>(0, 0) : k * (nr * gu[i * C + j] + nc * gv[i * C + j]) / n2;
    }
  dft2(phi, R, C, FFTW_BACKWARD);
  std::vector<double> out(R * C);
  for (uint64_t i = 0; i < R * C; ++i) out[i] = phi[i].real() / static_cast<double>(R * C);
  subtract_mean(out);
  for (double& x : out) x = -x;
  return out;
}

std::vector<double> fft_view(const std::vector<double>& image, uint64_t rows, uint64_t cols) {
  std::vector<std::complex<double>> f(image.begin(), image.end());
  dft2(f, rows, cols, FFTW_FORWARD);
  std::vector<double> out(rows * cols);
  for (uint64_t i = 0; i < rows; ++i)
    for (uint64_t j = 0; j < cols; ++j)  // numpy.fft.fftshift: element (i, j) moves to ((i + n/2) % n, …)
      out[((i + rows / 2) % rows) * cols + (j + cols / 2) % cols] = std::log1p(std::abs(f[i * cols + j]));
  return out;
}

}  // namespace tmorph
