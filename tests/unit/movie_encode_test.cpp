// stem movie's pieces: the GIF writer (decoded back with giflib's DGifSlurp: exact), the MP4 writer (decoded
// back with libavformat/libavcodec: frame count, even size, colours within the codec's error), both writing the same
// bytes to memory as to a file (image/movie_writer.h), the byte sinks, the PNG encoder to bytes and to a path, the caption
// (paper/ink, scale bar lengths, bitmap font) and the domain's frame plan (line positions, sweep radii).
#include <gif_lib.h>
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libswscale/swscale.h>
}

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "display/colormap.h"
#include "image/bitmap_font.h"
#include "image/byte_sink.h"
#include "image/gif_writer.h"
#include "image/movie_writer.h"
#include "stem/images/movie_frame.h"
#include "image/mp4_writer.h"
#include "image/png_encoder.h"
#include "stem/products/movie_plan.h"
#include "tensormorph/error.h"

namespace tmorph {
namespace {

// The build's plugin directory, where the MP4 encoder module (libtensormorph-encoder-mp4.so) is written.
const std::string kEncoderDir = TM_ENCODER_DIR;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tm-movie-test-" + std::to_string(::getpid()) + "-" + name)).string();
}

// A frame of `colours` distinct grey-blue colours in vertical stripes, shifted by `t`.
RgbaImage stripes(uint32_t w, uint32_t h, uint32_t colours, uint32_t t) {
  RgbaImage img(w, h);
  for (uint32_t y = 0; y < h; ++y)
    for (uint32_t x = 0; x < w; ++x) {
      const uint32_t k = (x + y * w + t) % colours;
      uint8_t* p = img.at(x, y);
      p[0] = static_cast<uint8_t>(k), p[1] = static_cast<uint8_t>(255 - k), p[2] = static_cast<uint8_t>(k / 2 + t), p[3] = 255;
    }
  return img;
}

struct GifCloser {
  void operator()(GifFileType* g) const {
    int err = 0;
    DGifCloseFile(g, &err);
  }
};

std::unique_ptr<GifFileType, GifCloser> slurp(const std::string& path) {
  int err = 0;
  std::unique_ptr<GifFileType, GifCloser> gif(DGifOpenFileName(path.c_str(), &err));
  EXPECT_TRUE(gif) << GifErrorString(err);
  if (gif) {
    EXPECT_EQ(DGifSlurp(gif.get()), GIF_OK);
  }
  return gif;
}

// The RGB of pixel (x, y) of saved image i.
std::array<uint8_t, 3> gif_pixel(const GifFileType* g, int i, uint32_t x, uint32_t y) {
  const SavedImage& im = g->SavedImages[i];
  const ColorMapObject* map = im.ImageDesc.ColorMap ? im.ImageDesc.ColorMap : g->SColorMap;
  const GifColorType c = map->Colors[im.RasterBits[y * static_cast<uint32_t>(im.ImageDesc.Width) + x]];
  return {c.Red, c.Green, c.Blue};
}

TEST(GifWrite, FramesDecodeExactlyWithDelayAndLoop) {
  const std::string path = temp_path("exact.gif");
  std::vector<RgbaImage> frames = {stripes(37, 21, 256, 0), stripes(37, 21, 3, 1), stripes(37, 21, 200, 2)};
  frames[1].at(0, 0)[3] = 0;  // alpha is dropped
  {
    GifWriter w(MovieTarget::file(path), 37, 21, 25);
    EXPECT_EQ(w.delay_cs(), 4u);
    for (const RgbaImage& f : frames) w.add(f);
    w.finish();
    EXPECT_EQ(w.frames(), 3u);
    EXPECT_EQ(w.inexact_frames(), 0u);
    EXPECT_EQ(w.max_error(), 0u);
  }
  auto gif = slurp(path);
  ASSERT_TRUE(gif);
  ASSERT_EQ(gif->ImageCount, 3);
  EXPECT_EQ(gif->SWidth, 37);
  EXPECT_EQ(gif->SHeight, 21);
  bool loops = false;
  for (int i = 0; i < gif->ImageCount; ++i) {
    GraphicsControlBlock gcb;
    ASSERT_EQ(DGifSavedExtensionToGCB(gif.get(), i, &gcb), GIF_OK);
    EXPECT_EQ(gcb.DelayTime, 4);
    EXPECT_EQ(gcb.TransparentColor, NO_TRANSPARENT_COLOR);
    for (int e = 0; e < gif->SavedImages[i].ExtensionBlockCount; ++e) {
      const ExtensionBlock& b = gif->SavedImages[i].ExtensionBlocks[e];
      if (b.Function == APPLICATION_EXT_FUNC_CODE && b.ByteCount == 11 && std::string(reinterpret_cast<char*>(b.Bytes), 11) == "NETSCAPE2.0") {
        loops = true;
        const ExtensionBlock& sub = gif->SavedImages[i].ExtensionBlocks[e + 1];
        EXPECT_EQ(sub.Bytes[0], 1);
        EXPECT_EQ(sub.Bytes[1] | sub.Bytes[2] << 8, 0);  // forever
      }
    }
    for (uint32_t y = 0; y < 21; ++y)
      for (uint32_t x = 0; x < 37; ++x) {
        const uint8_t* p = frames[i].at(x, y);
        ASSERT_EQ(gif_pixel(gif.get(), i, x, y), (std::array<uint8_t, 3>{p[0], p[1], p[2]})) << "frame " << i << " at " << x << "," << y;
      }
  }
  EXPECT_TRUE(loops);
  std::filesystem::remove(path);
}

TEST(GifWrite, MoreThan256ColoursKeepTheMostFrequentAndReportTheError) {
  const std::string path = temp_path("many.gif");
  RgbaImage f = stripes(40, 40, 256, 0);  // 256 colours, then 4 more near ones
  for (uint32_t x = 0; x < 4; ++x) f.at(x, 39)[0] = static_cast<uint8_t>(f.at(x, 39)[0] + 1), f.at(x, 39)[2] ^= 0;
  {
    GifWriter w(MovieTarget::file(path), 40, 40, 10);
    w.add(f);
    w.finish();
    EXPECT_EQ(w.inexact_frames(), 1u);
    EXPECT_GE(w.max_error(), 1u);
    EXPECT_LE(w.max_error(), 2u);
  }
  auto gif = slurp(path);
  ASSERT_TRUE(gif);
  uint32_t worst = 0;
  for (uint32_t y = 0; y < 40; ++y)
    for (uint32_t x = 0; x < 40; ++x) {
      const auto c = gif_pixel(gif.get(), 0, x, y);
      for (int k = 0; k < 3; ++k) worst = std::max<uint32_t>(worst, static_cast<uint32_t>(std::abs(c[k] - f.at(x, y)[k])));
    }
  EXPECT_GE(worst, 1u);
  EXPECT_LE(worst, 2u);
  std::filesystem::remove(path);
}

TEST(GifWrite, ErrorsNameThePathAndLeaveNoPartialFile) {
  try {
    GifWriter w(MovieTarget::file("/nonexistent-dir/x.gif"), 4, 4, 10);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.gif: cannot create"), std::string::npos) << e.what();
  }
  const std::string path = temp_path("partial.gif");
  {
    GifWriter w(MovieTarget::file(path), 4, 4, 10);
    w.add(stripes(4, 4, 3, 0));
    EXPECT_THROW(w.add(stripes(5, 4, 3, 0)), Error);  // another size
  }  // unfinished: removed
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_THROW(GifWriter(MovieTarget::file(path), 4, 4, 0), Error);
  EXPECT_THROW(GifWriter(MovieTarget::file(path), 0, 4, 10), Error);
}

struct InputCloser {
  void operator()(AVFormatContext* f) const { avformat_close_input(&f); }
};
struct CodecFree {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FrameFree {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct PacketFree {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct SwsFree {
  void operator()(SwsContext* s) const { sws_freeContext(s); }
};

// Every frame of the file's first video stream as RGBA.
std::vector<RgbaImage> decode_mp4(const std::string& path, std::string& codec) {
  AVFormatContext* raw = nullptr;
  EXPECT_EQ(avformat_open_input(&raw, path.c_str(), nullptr, nullptr), 0);
  std::unique_ptr<AVFormatContext, InputCloser> in(raw);
  EXPECT_GE(avformat_find_stream_info(in.get(), nullptr), 0);
  const int s = av_find_best_stream(in.get(), AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
  EXPECT_GE(s, 0);
  const AVCodecParameters* par = in->streams[s]->codecpar;
  codec = avcodec_get_name(par->codec_id);
  const AVCodec* dec = avcodec_find_decoder(par->codec_id);
  std::unique_ptr<AVCodecContext, CodecFree> ctx(avcodec_alloc_context3(dec));
  avcodec_parameters_to_context(ctx.get(), par);
  EXPECT_EQ(avcodec_open2(ctx.get(), dec, nullptr), 0);
  std::unique_ptr<AVFrame, FrameFree> frame(av_frame_alloc());
  std::unique_ptr<AVPacket, PacketFree> packet(av_packet_alloc());
  std::unique_ptr<SwsContext, SwsFree> sws;
  std::vector<RgbaImage> out;
  auto drain = [&] {
    while (avcodec_receive_frame(ctx.get(), frame.get()) == 0) {
      if (!sws)
        sws.reset(sws_getContext(frame->width, frame->height, static_cast<AVPixelFormat>(frame->format), frame->width, frame->height,
                                 AV_PIX_FMT_RGBA, SWS_BICUBIC, nullptr, nullptr, nullptr));
      std::unique_ptr<AVFrame, FrameFree> rgba(av_frame_alloc());  // aligned rows for swscale
      rgba->format = AV_PIX_FMT_RGBA, rgba->width = frame->width, rgba->height = frame->height;
      EXPECT_EQ(av_frame_get_buffer(rgba.get(), 0), 0);
      sws_scale(sws.get(), frame->data, frame->linesize, 0, frame->height, rgba->data, rgba->linesize);
      RgbaImage img(static_cast<uint32_t>(frame->width), static_cast<uint32_t>(frame->height));
      for (uint32_t y = 0; y < img.height; ++y)
        std::memcpy(img.at(0, y), rgba->data[0] + static_cast<ptrdiff_t>(y) * rgba->linesize[0], size_t{img.width} * 4);
      out.push_back(std::move(img));
    }
  };
  while (av_read_frame(in.get(), packet.get()) >= 0) {
    if (packet->stream_index == s) {
      avcodec_send_packet(ctx.get(), packet.get());
      drain();
    }
    av_packet_unref(packet.get());
  }
  avcodec_send_packet(ctx.get(), nullptr);
  drain();
  return out;
}

// A smooth frame (a gradient and a square moving on the 2 x 2 chroma grid, as product cells do): what H.264
// in 4:2:0 keeps well.
RgbaImage smooth(uint32_t w, uint32_t h, uint32_t t) {
  RgbaImage img(w, h);
  for (uint32_t y = 0; y < h; ++y)
    for (uint32_t x = 0; x < w; ++x) {
      uint8_t* p = img.at(x, y);
      const bool square = x >= 4 + 2 * t && x < 14 + 2 * t && y >= 6 && y < 16;
      p[0] = square ? 240 : static_cast<uint8_t>(x * 6);
      p[1] = square ? 240 : static_cast<uint8_t>(y * 10);
      p[2] = square ? 40 : 128;
      p[3] = 255;
    }
  return img;
}

TEST(Mp4Write, DecodesToTheFramesAtEvenSizeWithinTheCodecsError) {
  const std::string path = temp_path("round.mp4");
  std::vector<RgbaImage> frames;
  for (uint32_t t = 0; t < 5; ++t) frames.push_back(smooth(37, 21, t));
  {
    Mp4Writer w(MovieTarget::file(path), 37, 21, 8, kEncoderDir);
    EXPECT_EQ(w.coded_width(), 38u);
    EXPECT_EQ(w.coded_height(), 22u);
    for (const RgbaImage& f : frames) w.add(f);
    w.finish();
    EXPECT_EQ(w.frames(), 5u);
  }
  std::ifstream file(path, std::ios::binary);
  char head[8];
  file.read(head, 8);
  EXPECT_EQ(std::string(head + 4, 4), "ftyp");
  std::string codec;
  const std::vector<RgbaImage> decoded = decode_mp4(path, codec);
  EXPECT_EQ(codec, "h264");
  ASSERT_EQ(decoded.size(), 5u);
  for (size_t i = 0; i < decoded.size(); ++i) {
    ASSERT_EQ(decoded[i].width, 38u);
    ASSERT_EQ(decoded[i].height, 22u);
    double sum = 0;
    int worst = 0;
    for (uint32_t y = 0; y < 21; ++y)
      for (uint32_t x = 0; x < 37; ++x)
        for (int k = 0; k < 3; ++k) {
          const int d = std::abs(decoded[i].at(x, y)[k] - frames[i].at(x, y)[k]);
          sum += d, worst = std::max(worst, d);
        }
    EXPECT_LT(sum / (37 * 21 * 3), 4.0) << "frame " << i;
    EXPECT_LT(worst, 64) << "frame " << i;  // 4:2:0 chroma at the square's sharp edges
    // the padding repeats the last column and row
    EXPECT_LT(std::abs(decoded[i].at(37, 5)[1] - decoded[i].at(36, 5)[1]), 12);
  }
  std::filesystem::remove(path);
}

TEST(Mp4Write, ErrorsNameThePathAndLeaveNoPartialFile) {
  try {
    Mp4Writer w(MovieTarget::file("/nonexistent-dir/x.mp4"), 16, 16, 10, kEncoderDir);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.mp4: cannot create"), std::string::npos) << e.what();
  }
  const std::string path = temp_path("partial.mp4");
  {
    Mp4Writer w(MovieTarget::file(path), 16, 16, 10, kEncoderDir);
    w.add(smooth(16, 16, 0));
    EXPECT_THROW(w.add(smooth(16, 18, 0)), Error);
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_THROW(Mp4Writer(MovieTarget::file(path), 16, 16, -1, kEncoderDir), Error);
}

// Without the module an MP4 is refused as unavailable, naming the module it looked for; nothing is written.
TEST(Mp4Write, AMissingEncoderModuleIsUnavailableAndNamed) {
  const std::string path = temp_path("nomodule.mp4");
  try {
    Mp4Writer w(MovieTarget::file(path), 16, 16, 10, "/nonexistent-plugin-dir");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unavailable);
    EXPECT_NE(std::string(e.what()).find("/nonexistent-plugin-dir/libtensormorph-encoder-mp4.so"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

// A file of that name that is no encoder module (here a backend plugin) is refused as unavailable, naming the
// missing entry symbol, and is never called.
TEST(Mp4Write, ALibraryWithoutTheEncoderEntryIsUnavailableAndNamed) {
  const std::filesystem::path dir = temp_path("not-an-encoder");
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(std::string(TM_TEST_PLUGIN_DIR) + "/libtensormorph-backend-testaccel.so",
                             dir / "libtensormorph-encoder-mp4.so", std::filesystem::copy_options::overwrite_existing);
  const std::string path = temp_path("wrongmodule.mp4");
  try {
    Mp4Writer w(MovieTarget::file(path), 16, 16, 10, dir.string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unavailable);
    EXPECT_NE(std::string(e.what()).find("no symbol tensormorph_movie_encoder_entry"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  std::filesystem::remove_all(dir);
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// One writer interface, two targets: the bytes in memory are the bytes of the file, for both formats (the MP4 muxer
// seeks back through the sink to fill in sizes, as in a file).
TEST(MovieWriter, MemoryHoldsTheBytesTheFileHolds) {
  for (const MovieFormat format : {MovieFormat::gif, MovieFormat::mp4}) {
    const std::string path = temp_path(std::string("same.") + std::string(movie_format_name(format)));
    std::string from_memory;
    std::vector<std::pair<std::string, uint64_t>> facts;
    for (const MovieTarget& target : {MovieTarget::file(path), MovieTarget::memory(format, "movie in memory")}) {
      ASSERT_EQ(target.format, format);
      auto w = open_movie_writer(target, 37, 21, 8, kEncoderDir);
      EXPECT_EQ(w->format(), format);
      for (uint32_t t = 0; t < 5; ++t) w->add(smooth(37, 21, t));
      EXPECT_THROW(w->take_bytes(), Error);  // not finished yet
      w->finish();
      EXPECT_EQ(w->frames(), 5u);
      if (target.in_memory()) {
        from_memory = w->take_bytes();
        EXPECT_EQ(w->facts(), facts);
      } else {
        EXPECT_THROW(w->take_bytes(), Error);  // a file's bytes are in the file
        facts = w->facts();
      }
    }
    const std::string from_file = file_bytes(path);
    EXPECT_GT(from_file.size(), 100u);
    EXPECT_TRUE(from_memory == from_file) << movie_format_name(format) << ": " << from_memory.size() << " bytes in memory, "
                                          << from_file.size() << " in the file";
    std::filesystem::remove(path);
  }
}

TEST(MovieWriter, FormatByExtensionAndErrorsNameTheMemoryTarget) {
  EXPECT_EQ(movie_format("a/b.GIF"), MovieFormat::gif);
  EXPECT_EQ(movie_format("x.mp4"), MovieFormat::mp4);
  EXPECT_THROW(movie_format("x.avi"), Error);
  EXPECT_THROW(movie_format("dir.gif/x"), Error);
  auto w = open_movie_writer(MovieTarget::memory(MovieFormat::gif, "movie of a0"), 4, 4, 10, kEncoderDir);
  try {
    w->add(stripes(5, 4, 3, 0));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("movie of a0: frame 0 is 5 x 4"), std::string::npos) << e.what();
  }
}

TEST(ByteSink, MemorySeeksAndOverwritesAFileIsKeptOnlyWhenCommitted) {
  auto m = ByteSink::memory("bytes");
  m->write("abcdef", 6);
  m->seek(2);
  m->write("XY", 2);
  m->seek(6);
  m->write("g", 1);
  EXPECT_EQ(m->size(), 7u);
  EXPECT_THROW(m->seek(8), Error);  // past the bytes written
  m->commit();
  EXPECT_EQ(m->take(), "abXYefg");

  const std::string path = temp_path("sink.bin");
  {
    auto f = ByteSink::file(path);
    f->write("partial", 7);
    EXPECT_TRUE(std::filesystem::exists(path));
    EXPECT_THROW(f->take(), Error);
  }  // never committed: removed
  EXPECT_FALSE(std::filesystem::exists(path));
  {
    auto f = ByteSink::file(path);
    f->write("0123456789", 10);
    f->seek(3);
    f->write("ab", 2);
    f->commit();
  }
  EXPECT_EQ(file_bytes(path), "012ab56789");
  std::filesystem::remove(path);
  try {
    ByteSink::file("/nonexistent-dir/x.bin");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.bin: cannot create (No such file or directory)"), std::string::npos) << e.what();
  }
}

// The still-image encoder: a PNG written to a path is the bytes encoded in memory; a path that cannot be written
// is Error(Io) naming it, and leaves nothing.
TEST(PngEncoder, TheFileHoldsTheEncodedBytes) {
  const RgbaImage img = stripes(19, 7, 40, 3);
  const PngText text = {{"tensormorph:test", "yes"}};
  const std::string bytes = encode_png(img, text, "test image");
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
  const std::string path = temp_path("still.png");
  write_png(path, img, text);
  EXPECT_TRUE(file_bytes(path) == bytes);
  std::filesystem::remove(path);
  try {
    write_png("/nonexistent-dir/x.png", img, text);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.png: cannot create"), std::string::npos) << e.what();
  }
  EXPECT_THROW(encode_png(RgbaImage(), text), Error);
}

TEST(MovieFrame, ScaleBarsAreRoundLengthsWithinAThird) {
  EXPECT_DOUBLE_EQ(scale_bar_length(5, 32.0 / 3), 50);   // 53.3 mrad -> 50
  EXPECT_DOUBLE_EQ(scale_bar_length(0.246, 8.0 / 3), 0.5);
  EXPECT_DOUBLE_EQ(scale_bar_length(1, 100.0 / 3), 20);  // 33.3 px -> 20
  EXPECT_DOUBLE_EQ(scale_bar_length(3, 10), 20);         // 30 -> 20 (>= one cell)
  EXPECT_EQ(scale_bar_length(NAN, 10), 0);
  EXPECT_EQ(scale_bar_length(10, 0.5), 0);
}

TEST(MovieFrame, CaptionUsesTheMapsDarkestAndLightestEntries) {
  const auto gray = paper_and_ink(colormap("gray"));
  EXPECT_EQ(gray[0], (std::array<uint8_t, 4>{0, 0, 0, 255}));
  EXPECT_EQ(gray[1], (std::array<uint8_t, 4>{255, 255, 255, 255}));
  const Colormap& viridis = colormap("viridis");
  const auto v = paper_and_ink(viridis);
  EXPECT_EQ(v[0][0], viridis.rgba[0][0]);
  EXPECT_EQ(v[1][0], viridis.rgba[255][0]);
}

TEST(BitmapFont, DrawsKnownGlyphsAndBoxesUnknownOnes) {
  EXPECT_EQ(text_width("AB"), 11u);
  EXPECT_EQ(text_width("", 2), 0u);
  const uint8_t ink[4] = {255, 255, 255, 255};
  RgbaImage one(5, 7), box(5, 7), lower(5, 7), upper(5, 7);
  draw_text(one, 0, 0, "1", ink);
  draw_text(box, 0, 0, "~", ink);
  draw_text(lower, 0, 0, "m", ink);
  draw_text(upper, 0, 0, "M", ink);
  EXPECT_EQ(lower.pixels, upper.pixels);
  // "1": the foot row is .###.; the box's middle rows are #...#
  EXPECT_EQ(one.at(0, 6)[0], 0);
  EXPECT_EQ(one.at(2, 6)[0], 255);
  EXPECT_EQ(box.at(0, 3)[0], 255);
  EXPECT_EQ(box.at(2, 3)[0], 0);
  RgbaImage clipped(3, 3);
  draw_text(clipped, 1, 1, "8888", ink, 2);  // outside pixels are skipped
}

TEST(MoviePlan, LinePositionsAndSweepValues) {
  const std::array<uint64_t, 2> scan{8, 8};
  auto line = scan_line_positions({1, 0}, {4, 6}, 0, scan);
  ASSERT_EQ(line.size(), 7u);
  EXPECT_EQ(line.front(), (ScanPoint{1, 0}));
  EXPECT_EQ(line[1], (ScanPoint{2, 1}));  // 1.5 rounds away from zero
  EXPECT_EQ(line.back(), (ScanPoint{4, 6}));
  EXPECT_EQ(scan_line_positions({7, 7}, {0, 0}, 0, scan).size(), 8u);
  EXPECT_EQ(scan_line_positions({2, 3}, {2, 3}, 0, scan), (std::vector<ScanPoint>{{2, 3}}));
  EXPECT_EQ(scan_line_positions({0, 0}, {7, 7}, 1, scan), (std::vector<ScanPoint>{{0, 0}}));
  EXPECT_EQ(scan_line_positions({0, 0}, {7, 0}, 3, scan), (std::vector<ScanPoint>{{0, 0}, {4, 0}, {7, 0}}));
  EXPECT_THROW(scan_line_positions({0, 0}, {0, 8}, 0, scan), Error);
  EXPECT_EQ(sweep_values(2, 8, 4, "r"), (std::vector<double>{2, 4, 6, 8}));
  EXPECT_EQ(sweep_values(8, 2, 3, "r"), (std::vector<double>{8, 5, 2}));
  EXPECT_EQ(sweep_values(3, 3, 2, "r"), (std::vector<double>{3, 3}));
  EXPECT_EQ(sweep_values(3, 9, 1, "r"), (std::vector<double>{3}));
  EXPECT_THROW(sweep_values(1, 2, 0, "r"), Error);
  EXPECT_THROW(sweep_values(-1, 2, 3, "r"), Error);
  EXPECT_THROW(sweep_values(1, INFINITY, 3, "r"), Error);
}

}  // namespace
}  // namespace tmorph
