// The parameters of the 4D-STEM operations, declared once (core/param_schema.h): for each, its HTTP query name,
// Python keyword and CLI flag, kind, range and unit. The server parses its queries through these declarations
// (unknown and repeated parameters refused), the CLI validates its flags' text with them, and every face checks
// the typed request it built with check_*_request before anything is read or computed, so a bad value never
// reaches a kernel and the same request gets the same refusal everywhere. Ranges are generous bounds of what is
// physical (a semi-angle up to 1000 mrad, |C10| up to 1 mm), not the data's; a value inside them that the data
// cannot serve is refused later with the domain's own message.
#pragma once

#include <string_view>

#include "core/param_schema.h"
#include "stem/products/movie_plan.h"
#include "stem/products/product_run.h"
#include "stem/runs/ssb_run.h"

namespace tmorph {

const OperationSchema& product_params();  // stem.product: GET …/products/{kind}, `stem KIND`, tm.stem.product
const OperationSchema& ssb_params();      // stem.ssb: GET …/ssb, `stem ssb`, tm.stem.ssb
const OperationSchema& movie_params();    // stem.movie: GET …/movie, `stem movie`
const OperationSchema& frame_params();    // stem.frame: GET …/frame
const OperationSchema& block_params();        // stem.block: GET …/block
const OperationSchema& calibration_params();  // stem.calibration: GET …/calibration
const OperationSchema& chunks_params();       // stem.chunks: GET …/chunks (stored chunks of a frame window)
// The operation with this name ("stem.product", …); nullptr when there is none.
const OperationSchema* stem_operation(std::string_view name);

// Every value the request carries against its declaration; throws InvalidArgument naming the parameter as
// `face` spells it. Called by each face on the request it built, before opening or computing anything.
void check_product_request(const ProductSpec& spec, Face face);
void check_ssb_request(const SsbRunRequest& request, Face face);
void check_movie_request(const MovieRequest& request, double fps, Face face);

}  // namespace tmorph
