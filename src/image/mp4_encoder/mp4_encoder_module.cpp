// The MP4 encoder module (libtensormorph-encoder-mp4.so, include/tensormorph/movie_encoder_abi.h): RGBA8 frames as
// H.264 (libavcodec's libx264, yuv420p, CRF 16, preset veryfast, a key frame every 12) in an MP4 container at a
// constant frame rate, written through the caller's sink (a file or memory: the caller's; a seekable AVIOContext, so
// the muxer writes the index after the frames exactly as to a file). Core opens it only when an MP4 is written, so
// libav's libraries load in no other process. Nothing here throws across the table: every failure is a status and a
// message naming the movie.
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
}

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "tensormorph/movie_encoder_abi.h"

namespace {

// The muxer's context; its AVIOContext is ours (custom I/O), freed here with its buffer.
struct OutputDeleter {
  void operator()(AVFormatContext* f) const {
    if (f->pb) {
      av_freep(&f->pb->buffer);
      avio_context_free(&f->pb);
    }
    avformat_free_context(f);
  }
};
struct CodecDeleter {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FrameDeleter {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct PacketDeleter {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct SwsDeleter {
  void operator()(SwsContext* s) const { sws_freeContext(s); }
};

std::string av_reason(int code) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(code, buf, sizeof buf);
  return buf;
}

// A failure on its way out of the table.
struct Failure {
  tm_movie_status status;
  std::string message;
};

void write_message(char* message, size_t size, const std::string& text) {
  if (!message || size == 0) return;
  const size_t n = std::min(text.size(), size - 1);
  text.copy(message, n);
  message[n] = 0;
}

// libavformat 61 made the write callback's buffer const.
#if LIBAVFORMAT_VERSION_MAJOR >= 61
using WriteBuffer = const uint8_t*;
#else
using WriteBuffer = uint8_t*;
#endif

}  // namespace

struct tm_movie_encoder {
  std::string path;  // the movie's name in messages
  tm_movie_sink sink{};
  uint64_t position = 0, end = 0;  // in the sink, for the muxer's SEEK_CUR, SEEK_END and AVSEEK_SIZE
  std::unique_ptr<AVFormatContext, OutputDeleter> out;
  std::unique_ptr<AVCodecContext, CodecDeleter> codec;
  std::unique_ptr<AVFrame, FrameDeleter> yuv, rgba;  // libav-allocated (aligned rows: swscale's SIMD paths need them)
  std::unique_ptr<AVPacket, PacketDeleter> packet;
  std::unique_ptr<SwsContext, SwsDeleter> sws;
  AVStream* stream = nullptr;
  uint32_t width = 0, height = 0;
  uint64_t frames = 0;
  bool finished = false;

  // AVIOContext callbacks: the bytes go to the caller's sink.
  static int write_packet(void* opaque, WriteBuffer data, int size) {
    auto* e = static_cast<tm_movie_encoder*>(opaque);
    if (size < 0 || e->sink.write(e->sink.context, data, static_cast<size_t>(size)) != 0) return AVERROR(EIO);
    e->position += static_cast<uint64_t>(size);
    e->end = std::max(e->end, e->position);
    return size;
  }
  static int64_t seek(void* opaque, int64_t offset, int whence) {
    auto* e = static_cast<tm_movie_encoder*>(opaque);
    if (whence & AVSEEK_SIZE) return static_cast<int64_t>(e->end);
    const int64_t base = (whence & ~AVSEEK_FORCE) == SEEK_CUR ? static_cast<int64_t>(e->position)
                         : (whence & ~AVSEEK_FORCE) == SEEK_END ? static_cast<int64_t>(e->end)
                                                                : 0;
    const int64_t to = base + offset;
    if (to < 0 || static_cast<uint64_t>(to) > e->end || e->sink.seek(e->sink.context, static_cast<uint64_t>(to)) != 0) return AVERROR(EIO);
    e->position = static_cast<uint64_t>(to);
    return to;
  }
  void check(int rc, const std::string& what) const {
    if (rc < 0) throw Failure{TM_MOVIE_IO, path + ": " + what + " (libav: " + av_reason(rc) + ")"};
  }
  // Sends `frame` (null: flush) and writes every packet the encoder has ready.
  void encode(const AVFrame* frame) {
    check(avcodec_send_frame(codec.get(), frame), "cannot encode frame " + std::to_string(frames));
    for (;;) {
      const int rc = avcodec_receive_packet(codec.get(), packet.get());
      if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return;
      check(rc, "cannot encode frame " + std::to_string(frames));
      av_packet_rescale_ts(packet.get(), codec->time_base, stream->time_base);
      packet->stream_index = stream->index;
      check(av_interleaved_write_frame(out.get(), packet.get()), "cannot write");
    }
  }
  void open(double fps) {
    static std::once_flag quiet;
    std::call_once(quiet, [] { av_log_set_level(AV_LOG_ERROR); });  // libx264's statistics are not ours to print
    const AVCodec* encoder = avcodec_find_encoder_by_name("libx264");
    if (!encoder)
      throw Failure{TM_MOVIE_UNAVAILABLE, path + ": this libavcodec has no libx264 encoder (H.264 for MP4); install Debian's "
                                                 "libavcodec with libx264 (scripts/install-deps) or write a .gif"};
    AVFormatContext* raw = nullptr;
    check(avformat_alloc_output_context2(&raw, nullptr, "mp4", nullptr), "cannot set up an MP4 container");
    out.reset(raw);
    codec.reset(avcodec_alloc_context3(encoder));
    yuv.reset(av_frame_alloc());
    rgba.reset(av_frame_alloc());
    packet.reset(av_packet_alloc());
    if (!codec || !yuv || !rgba || !packet) throw Failure{TM_MOVIE_IO, path + ": out of memory for the encoder"};
    const AVRational rate = av_d2q(fps, 1000);
    codec->width = static_cast<int>(width);
    codec->height = static_cast<int>(height);
    codec->pix_fmt = AV_PIX_FMT_YUV420P;
    codec->time_base = av_inv_q(rate);
    codec->framerate = rate;
    codec->gop_size = 12;
    if (out->oformat->flags & AVFMT_GLOBALHEADER) codec->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    av_opt_set(codec->priv_data, "preset", "veryfast", 0);
    av_opt_set(codec->priv_data, "crf", "16", 0);
    check(avcodec_open2(codec.get(), encoder, nullptr), "cannot open the libx264 encoder");
    stream = avformat_new_stream(out.get(), nullptr);
    if (!stream) throw Failure{TM_MOVIE_IO, path + ": cannot add a video stream"};
    stream->time_base = codec->time_base;
    stream->avg_frame_rate = rate;
    check(avcodec_parameters_from_context(stream->codecpar, codec.get()), "cannot describe the video stream");
    // A seekable context (a seek callback) of libav's usual 32 KiB buffer, as avio_open gives a file.
    constexpr int kBuffer = 32768;
    auto* buffer = static_cast<unsigned char*>(av_malloc(kBuffer));
    if (!buffer) throw Failure{TM_MOVIE_IO, path + ": out of memory for the output buffer"};
    out->pb = avio_alloc_context(buffer, kBuffer, 1, this, nullptr, write_packet, seek);
    if (!out->pb) {
      av_free(buffer);
      throw Failure{TM_MOVIE_IO, path + ": out of memory for the output context"};
    }
    out->flags |= AVFMT_FLAG_CUSTOM_IO;
    check(avformat_write_header(out.get(), nullptr), "cannot write the MP4 header");
    yuv->format = AV_PIX_FMT_YUV420P;
    yuv->width = codec->width;
    yuv->height = codec->height;
    check(av_frame_get_buffer(yuv.get(), 0), "out of memory for a frame");
    rgba->format = AV_PIX_FMT_RGBA;
    rgba->width = codec->width;
    rgba->height = codec->height;
    check(av_frame_get_buffer(rgba.get(), 0), "out of memory for a frame");
    sws.reset(sws_getContext(codec->width, codec->height, AV_PIX_FMT_RGBA, codec->width, codec->height, AV_PIX_FMT_YUV420P,
                             SWS_BICUBIC, nullptr, nullptr, nullptr));
    if (!sws) throw Failure{TM_MOVIE_IO, path + ": cannot set up the RGBA to yuv420p conversion"};
  }
  void add(const uint8_t* pixels) {
    if (finished) throw Failure{TM_MOVIE_INVALID_ARGUMENT, path + ": the MP4 is already finished"};
    const size_t row = size_t{width} * 4;
    for (uint32_t y = 0; y < height; ++y)
      std::memcpy(rgba->data[0] + static_cast<ptrdiff_t>(y) * rgba->linesize[0], pixels + y * row, row);
    check(av_frame_make_writable(yuv.get()), "out of memory for a frame");
    sws_scale(sws.get(), rgba->data, rgba->linesize, 0, static_cast<int>(height), yuv->data, yuv->linesize);
    yuv->pts = static_cast<int64_t>(frames);
    encode(yuv.get());
    ++frames;
  }
  void finish() {
    if (finished) return;
    encode(nullptr);
    check(av_write_trailer(out.get()), "cannot write the MP4 index");
    avio_flush(out->pb);
    check(out->pb->error, "cannot write");
    finished = true;
  }
};

namespace {

// Runs `body`, turning what it throws into a status and a message.
template <class Body>
tm_movie_status guarded(char* message, size_t size, Body&& body) {
  try {
    body();
    return TM_MOVIE_OK;
  } catch (const Failure& f) {
    write_message(message, size, f.message);
    return f.status;
  } catch (const std::bad_alloc&) {
    write_message(message, size, "out of memory in the MP4 encoder");
    return TM_MOVIE_IO;
  } catch (...) {
    write_message(message, size, "the MP4 encoder failed");
    return TM_MOVIE_IO;
  }
}

tm_movie_status mp4_open(const char* name, const tm_movie_sink* sink, uint32_t width, uint32_t height, double fps,
                         tm_movie_encoder** out, char* message, size_t size) {
  if (!out) return TM_MOVIE_INVALID_ARGUMENT;
  *out = nullptr;
  const std::string where = name ? name : "(no name)";
  if (!sink || !sink->write || !sink->seek) {
    write_message(message, size, where + ": an MP4 encoder needs a sink with write and seek");
    return TM_MOVIE_INVALID_ARGUMENT;
  }
  if (!name || width < 2 || height < 2 || width > 16384 || height > 16384 || width % 2 || height % 2 || !(fps > 0) || !std::isfinite(fps)) {
    write_message(message, size, where + ": an MP4 encoder takes even frame sides 2..16384 and a positive finite fps");
    return TM_MOVIE_INVALID_ARGUMENT;
  }
  auto encoder = std::make_unique<tm_movie_encoder>();
  encoder->path = name;
  encoder->sink = *sink;
  encoder->width = width, encoder->height = height;
  const tm_movie_status status = guarded(message, size, [&] { encoder->open(fps); });
  if (status == TM_MOVIE_OK) *out = encoder.release();
  return status;
}

tm_movie_status mp4_add(tm_movie_encoder* encoder, const uint8_t* rgba, char* message, size_t size) {
  if (!encoder || !rgba) return TM_MOVIE_INVALID_ARGUMENT;
  return guarded(message, size, [&] { encoder->add(rgba); });
}

tm_movie_status mp4_finish(tm_movie_encoder* encoder, char* message, size_t size) {
  if (!encoder) return TM_MOVIE_INVALID_ARGUMENT;
  return guarded(message, size, [&] { encoder->finish(); });
}

void mp4_destroy(tm_movie_encoder* encoder) { delete encoder; }

const tm_movie_encoder_v1 kTable = {TM_MOVIE_ENCODER_ABI_VERSION, "MP4 (H.264 through libavcodec's libx264, yuv420p)",
                                    mp4_open, mp4_add, mp4_finish, mp4_destroy};

}  // namespace

extern "C" __attribute__((visibility("default"))) const tm_movie_encoder_v1* tensormorph_movie_encoder_entry(uint32_t abi_version) {
  return abi_version == TM_MOVIE_ENCODER_ABI_VERSION ? &kTable : nullptr;
}
