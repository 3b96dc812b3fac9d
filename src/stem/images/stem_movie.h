// A movie of 4D-STEM products (`stem movie`, and the viewer's export button through the server's movie endpoint): every
// frame of a MoviePlan (stem/products/movie_plan.h) computed by compute_product (a detector sweep: all images in one
// pass, detector_sweep.h), drawn by render_product_image exactly as `stem <kind> -o OUT.png` draws it, captioned
// (label, scale bar: movie_frame.h) and encoded as GIF (exact colours) or MP4 (H.264) by the image module's movie
// writers (image/movie_writer.h), to a file or to memory.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "image/movie_writer.h"
#include "stem/acquisition.h"
#include "stem/images/product_image.h"
#include "stem/products/movie_plan.h"
#include "tensormorph/placement.h"
#include "tensormorph/planner.h"

namespace tmorph {

struct MovieResult {
  // file (the target's name), format, codec, frames, passes, shared_limits, width, height, fps, delay_cs (gif),
  // inexact_frames and max_error (gif), coded_width and coded_height (mp4), scale_bar {units_per_pixel, unit},
  // caption {paper, ink (RGB), height}, mode, labels, display {colormap, transform, limits per frame}, seconds.
  nlohmann::json report;
  std::vector<Placement> placements;  // what ran (the products' passes, the colour op), frame by frame
  std::string bytes;                  // the movie, for a target in memory (empty for a file)
};

// Each frame's limits are the display's, else automatic over that frame's values (as its PNG); with
// `shared_limits`, the ends not given are the union of every frame's automatic limits (the frames' values are
// held until then: frames x frame values x 8 bytes), so every frame is its PNG under those --limits. A file target
// is created when the first frame is drawn and kept only when every frame is computed and encoded (an unfinished
// file is removed); a memory target's bytes are the result's `bytes`, the same bytes the file would hold. `planner`
// is called when something runs; an MP4 is encoded by the module in `encoder_dir` (the runtime's plugin directory).
// Throws what compute_product, the renderer and the writers throw.
MovieResult write_stem_movie(const Acquisition& acq, const MoviePlan& plan, const ProductDisplay& display, const MovieTarget& out,
                             double fps, bool shared_limits, const std::function<const Planner&()>& planner,
                             const std::string& encoder_dir);

}  // namespace tmorph
