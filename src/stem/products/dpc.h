// Centre of mass, differential phase contrast (DPC) with its rotation, integrated DPC (iDPC) and FFT
// views, on scan-grid fields of rows × cols positions (row-major). Contract in docs/stem.md, "Products".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stem/products/products.h"

namespace tmorph {

// A vector field on the scan grid, in detector pixels: u along detector rows, v along detector columns.
struct ScanField {
  uint64_t rows = 0, cols = 0;
  std::vector<double> u, v;
};

// μ_r = Σ row·I / S and μ_c = Σ col·I / S per position (S = Σ I over the CoM pixels; S = 0 gives 0),
// each then minus its mean over the scan.
ScanField center_of_mass(const ProductResult& r);

struct DpcRotation {
  double angle = 0;        // radians, in [0, π)
  bool transpose = false;  // (u, v) swapped before rotating
  double curl2 = 0;        // ⟨curl²⟩ of the rotated field
  double div2 = 0;         // ⟨div²⟩ of the rotated field
  double curl2_other = 0;  // the best ⟨curl²⟩ with the other transpose choice
};

// The rotated field: transpose first when asked, then (u, v) → (u cosθ − v sinθ, u sinθ + v cosθ).
ScanField rotate_field(const ScanField& f, double angle, bool transpose);

// The angle in [0, π) and transpose that minimise the mean squared curl of the rotated field, found
// analytically: with K = ∂v/∂r − ∂u/∂c and D = ∂u/∂r + ∂v/∂c of the unrotated field (central differences,
// interior positions), curl(θ) = K cosθ + D sinθ, so ⟨curl²⟩(θ) = m + a cos2θ + b sin2θ with
// m = (⟨K²⟩+⟨D²⟩)/2, a = (⟨K²⟩−⟨D²⟩)/2, b = ⟨KD⟩, minimal at 2θ = atan2(b, a) + π. Both transposes are
// tried; the lower wins (ties: no transpose). Needs at least 3 × 3 positions (InvalidArgument otherwise).
DpcRotation find_dpc_rotation(const ScanField& f);

// The rotation a dpc/idpc product uses: a given angle (degrees) with its transpose choice, or, when no angle
// is given, find_dpc_rotation's (any given transpose is then ignored). Either way curl2 and div2 are those of
// the rotated field; curl2_other only when found.
struct DpcRotationRequest {
  std::optional<double> angle_deg;
  bool transpose = false;
};
struct ResolvedDpcRotation {
  DpcRotation rotation;
  std::string source;  // "given" or "found (minimum mean squared curl)"
  bool found = false;
  ScanField rotated;   // rotate_field(com, rotation.angle, rotation.transpose)
};
ResolvedDpcRotation resolve_dpc_rotation(const ScanField& com, const DpcRotationRequest& request);

// {"source", "angle_deg", "angle_rad", "transpose", "mean_curl2", "mean_div2"} and, when found,
// "curl2_other_transpose".
nlohmann::json to_json(const ResolvedDpcRotation& r);

// ⟨curl²⟩ and ⟨div²⟩ of a field over its interior positions.
void curl_div(const ScanField& f, double* curl2, double* div2);

// iDPC: φ̂ = −0.25i (ν_r ĝ_u + ν_c ĝ_v) / (ν_r² + ν_c²), ν the FFT frequencies in cycles per position
// (numpy's fftfreq), the zero frequency set to 0; φ = real(IFFT φ̂); returns −(φ − mean φ). FFTW, float64.
std::vector<double> integrate_dpc(const ScanField& rotated);

// fftshift(log1p |FFT2(image)|) (unnormalised forward transform, numpy's conventions), float64.
std::vector<double> fft_view(const std::vector<double>& image, uint64_t rows, uint64_t cols);

}  // namespace tmorph
