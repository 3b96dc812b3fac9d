// The pyramid tables of the index (checkpoint_index.h): one row per tensor with the layout and the
// histogram edges, one row per tile with its fixed-size record (tile_stats.h), keyed so that a tile is
// one primary-key lookup.
#include <cstring>

#include "index/checkpoint_index.h"
#include "core/sqlite_db.h"
#include "tensormorph/error.h"

namespace tmorph {

void CheckpointIndex::store_pyramid(size_t i, const Pyramid& p) {
  const PyramidLayout& l = p.layout;
  SqliteStmt head(*db_,
                  "INSERT OR REPLACE INTO pyramids(tensor_id, view, slices, rows, cols, tile_rows, tile_cols, levels, edges) "
                  "VALUES(?,?,?,?,?,?,?,?,?)");
  head.bind(1, tensor_ids_[i]).bind(2, view_spec(l.view)).bind(3, static_cast<int64_t>(l.view.slices));
  head.bind(4, static_cast<int64_t>(l.view.rows)).bind(5, static_cast<int64_t>(l.view.cols));
  head.bind(6, int64_t{l.tile_rows}).bind(7, int64_t{l.tile_cols}).bind(8, static_cast<int64_t>(l.levels.size()));
  head.bind_blob(9, p.edges.data(), p.edges.size() * sizeof(double)).run();
  SqliteStmt del(*db_, "DELETE FROM pyramid_tiles WHERE tensor_id = ?");
  del.bind(1, tensor_ids_[i]).run();
  SqliteStmt ins(*db_, "INSERT INTO pyramid_tiles(tensor_id, level, slice, ty, tx, record) VALUES(?,?,?,?,?,?)");
  size_t k = 0;
  for (unsigned level = 0; level < l.levels.size(); ++level)
    for (uint64_t s = 0; s < l.view.slices; ++s)
      for (uint64_t ty = 0; ty < l.levels[level].rows; ++ty)
        for (uint64_t tx = 0; tx < l.levels[level].cols; ++tx) {
          const std::vector<uint8_t> record = encode_tile(p.tiles[k++]);
          ins.bind(1, tensor_ids_[i]).bind(2, int64_t{level}).bind(3, static_cast<int64_t>(s));
          ins.bind(4, static_cast<int64_t>(ty)).bind(5, static_cast<int64_t>(tx));
          ins.bind_blob(6, record.data(), record.size()).run();
        }
}

std::optional<CheckpointIndex::PyramidInfo> CheckpointIndex::load_pyramid_info(size_t i) const {
  SqliteStmt q(*db_, "SELECT view, slices, rows, cols, tile_rows, tile_cols, levels, edges FROM pyramids WHERE tensor_id = ?");
  q.bind(1, tensor_ids_[i]);
  if (!q.step()) return std::nullopt;
  const CheckpointTensor& t = checkpoint_.tensors[i];
  PyramidInfo info;
  const View2D view = parse_view(q.text(0), t.shape);
  info.layout = make_pyramid_layout(view);
  const auto where = report_.database + ": pyramid of " + t.name;
  if (static_cast<uint64_t>(q.int64(1)) != view.slices || static_cast<uint64_t>(q.int64(2)) != view.rows ||
      static_cast<uint64_t>(q.int64(3)) != view.cols || q.int64(4) != info.layout.tile_rows ||
      q.int64(5) != info.layout.tile_cols || static_cast<size_t>(q.int64(6)) != info.layout.levels.size())
    throw Error(ErrorKind::BadInput, where + ": the stored layout does not match the tensor's shape (delete the index file to rebuild it)");
  const auto edges = q.blob(7);
  info.edges.resize(edges.size() / sizeof(double));
  if (!edges.empty()) std::memcpy(info.edges.data(), edges.data(), info.edges.size() * sizeof(double));
  return info;
}

std::optional<TileStats> CheckpointIndex::load_tile(size_t i, const PyramidInfo& info, unsigned level, uint64_t slice,
                                                    uint64_t ty, uint64_t tx) const {
  SqliteStmt q(*db_, "SELECT record FROM pyramid_tiles WHERE tensor_id = ? AND level = ? AND slice = ? AND ty = ? AND tx = ?");
  q.bind(1, tensor_ids_[i]).bind(2, int64_t{level}).bind(3, static_cast<int64_t>(slice));
  q.bind(4, static_cast<int64_t>(ty)).bind(5, static_cast<int64_t>(tx));
  if (!q.step()) return std::nullopt;
  const auto record = q.blob(0);
  const size_t bins = info.edges.empty() ? 0 : info.edges.size() - 1;
  const std::string where = report_.database + ": tile " + std::to_string(level) + "/" + std::to_string(slice) + "/" +
                            std::to_string(ty) + "/" + std::to_string(tx) + " of " + checkpoint_.tensors[i].name;
  return decode_tile(record.data(), record.size(), bins, where.c_str());
}

std::vector<TileStats> CheckpointIndex::load_tiles(size_t i, const PyramidInfo& info, unsigned level, uint64_t slice,
                                                   uint64_t ty0, uint64_t ty1, uint64_t tx0, uint64_t tx1) const {
  SqliteStmt q(*db_,
               "SELECT ty, tx, record FROM pyramid_tiles WHERE tensor_id = ? AND level = ? AND slice = ? AND ty >= ? AND "
               "ty < ? AND tx >= ? AND tx < ? ORDER BY ty, tx");
  q.bind(1, tensor_ids_[i]).bind(2, int64_t{level}).bind(3, static_cast<int64_t>(slice));
  q.bind(4, static_cast<int64_t>(ty0)).bind(5, static_cast<int64_t>(ty1));
  q.bind(6, static_cast<int64_t>(tx0)).bind(7, static_cast<int64_t>(tx1));
  const size_t bins = info.edges.empty() ? 0 : info.edges.size() - 1;
  const std::string where = report_.database + ": level " + std::to_string(level) + " of the pyramid of " +
                            checkpoint_.tensors[i].name;
  std::vector<TileStats> out;
  out.reserve((ty1 - ty0) * (tx1 - tx0));
  while (q.step()) {
    const uint64_t expect = out.size();
    if (static_cast<uint64_t>(q.int64(0)) != ty0 + expect / (tx1 - tx0) ||
        static_cast<uint64_t>(q.int64(1)) != tx0 + expect % (tx1 - tx0))
      break;
    const auto record = q.blob(2);
    out.push_back(decode_tile(record.data(), record.size(), bins, where.c_str()));
  }
  if (out.size() != (ty1 - ty0) * (tx1 - tx0))
    throw Error(ErrorKind::BadInput, where + ": tiles are missing (delete the index file to rebuild it)");
  return out;
}

}  // namespace tmorph
