// The op table (compute/op_table.h): one row per ABI op, names that round-trip, and a placed call whose params
// are shorter than the contract's struct refused on the host before any backend reads them.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "compute/op_table.h"
#include "cpu/cpu_backend.h"
#include "ops/kernel_call.h"
#include "tensormorph/backend_registry.h"
#include "tensormorph/cost_model.h"
#include "tensormorph/error.h"
#include "tensormorph/planner.h"

namespace tmorph {
namespace {

TEST(OpTable, EveryAbiOpHasOneRowWhoseNameRoundTrips) {
  ASSERT_EQ(op_table().size(), static_cast<size_t>(TM_OP_COUNT_ - 1));
  std::set<std::string> names;
  for (const OpDescriptor& row : op_table()) {
    EXPECT_EQ(find_op(row.id), &row);
    EXPECT_TRUE(names.insert(std::string(row.name)).second) << row.name;
    EXPECT_EQ(parse_op(op_name(row.id)), row.id);
  }
  EXPECT_EQ(find_op(TM_OP_INVALID), nullptr);
  EXPECT_EQ(find_op(static_cast<tm_op>(TM_OP_COUNT_)), nullptr);
  // An op a newer plugin names. Only values inside the enum's range are valid tm_op values in C++
  // (UBSan's -fsanitize=enum refuses 99), so the first id past the table stands for it.
  EXPECT_EQ(op_name(static_cast<tm_op>(TM_OP_COUNT_)), "op#" + std::to_string(TM_OP_COUNT_));
  EXPECT_EQ(parse_op("stats.nothing"), TM_OP_INVALID);
}

TEST(OpTable, ShortParamsAreRefusedBeforeAnyBackendReadsThem) {
  BackendRegistry registry;
  registry.register_table(cpu::cpu_backend_table(), "static");
  CostModel costs;
  Constraints strict;
  strict.strict_backend = "cpu";
  OpRequest op;
  op.op = TM_OP_STATS_HISTOGRAM, op.dtype = DType::F32, op.elements = 4, op.bytes = 16;
  const Placement p = Planner(registry, costs, strict).place(op);
  const float values[4] = {0, 1, 2, 3};
  const uint32_t half_a_struct = 0;  // 4 bytes: less than tm_histogram_params_v1
  std::vector<uint8_t> out(64);
  try {
    run_placed_kernel(p, TM_OP_STATS_HISTOGRAM, {DType::F32, values, 4, &half_a_struct, sizeof half_a_struct, out.data(), out.size(), 1});
    FAIL() << "short params were passed on";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Internal);
    EXPECT_EQ(std::string(e.what()), "stats.histogram: params of 4 bytes, the contract's struct has " +
                                         std::to_string(sizeof(tm_histogram_params_v1)));
  }
}

}  // namespace
}  // namespace tmorph
