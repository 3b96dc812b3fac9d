#include "render/mp4_write.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
}

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "tensormorph/error.h"

namespace tmorph {

namespace {

struct OutputDeleter {
  void operator()(AVFormatContext* f) const {
    if (f->pb) avio_closep(&f->pb);
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

}  // namespace

struct Mp4Writer::State {
  std::string path;
  std::unique_ptr<AVFormatContext, OutputDeleter> out;
  std::unique_ptr<AVCodecContext, CodecDeleter> codec;
  std::unique_ptr<AVFrame, FrameDeleter> yuv, rgba;  // libav-allocated (aligned rows: swscale's SIMD paths need them)
  std::unique_ptr<AVPacket, PacketDeleter> packet;
  std::unique_ptr<SwsContext, SwsDeleter> sws;
  AVStream* stream = nullptr;
  uint32_t width = 0, height = 0, coded_w = 0, coded_h = 0;
  uint64_t frames = 0;
  bool open = false, finished = false;

  // An unfinished file (a throw in the constructor or add, or no finish()) is closed and removed.
  ~State() {
    if (!open || finished) return;
    out.reset();
    std::remove(path.c_str());
  }
  void check(int rc, const std::string& what) const {
    if (rc < 0) throw Error(ErrorKind::Io, path + ": " + what + " (libav: " + av_reason(rc) + ")");
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
};

Mp4Writer::Mp4Writer(const std::string& path, uint32_t width, uint32_t height, double fps) : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.path = path;
  if (width == 0 || height == 0 || width > 16384 || height > 16384)
    throw Error(ErrorKind::InvalidArgument, path + ": an MP4 frame is 1..16384 pixels a side, not " + std::to_string(width) + " x " +
                                                std::to_string(height));
  if (!(fps > 0) || !std::isfinite(fps)) throw Error(ErrorKind::InvalidArgument, path + ": fps must be a positive number");
  s.width = width, s.height = height;
  s.coded_w = width + (width & 1), s.coded_h = height + (height & 1);
  static std::once_flag quiet;
  std::call_once(quiet, [] { av_log_set_level(AV_LOG_ERROR); });  // libx264's statistics are not ours to print
  const AVCodec* encoder = avcodec_find_encoder_by_name("libx264");
  if (!encoder)
    throw Error(ErrorKind::Unavailable, path + ": this libavcodec has no libx264 encoder (H.264 for MP4); install Debian's libavcodec "
                                               "with libx264 (scripts/install-deps) or write a .gif");
  AVFormatContext* raw = nullptr;
  s.check(avformat_alloc_output_context2(&raw, nullptr, "mp4", path.c_str()), "cannot set up an MP4 container");
  s.out.reset(raw);
  s.codec.reset(avcodec_alloc_context3(encoder));
  s.yuv.reset(av_frame_alloc());
  s.rgba.reset(av_frame_alloc());
  s.packet.reset(av_packet_alloc());
  if (!s.codec || !s.yuv || !s.rgba || !s.packet) throw Error(ErrorKind::Io, path + ": out of memory for the encoder");
  const AVRational rate = av_d2q(fps, 1000);
  s.codec->width = static_cast<int>(s.coded_w);
  s.codec->height = static_cast<int>(s.coded_h);
  s.codec->pix_fmt = AV_PIX_FMT_YUV420P;
  s.codec->time_base = av_inv_q(rate);
  s.codec->framerate = rate;
  s.codec->gop_size = 12;
  if (s.out->oformat->flags & AVFMT_GLOBALHEADER) s.codec->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  av_opt_set(s.codec->priv_data, "preset", "veryfast", 0);
  av_opt_set(s.codec->priv_data, "crf", "16", 0);
  s.check(avcodec_open2(s.codec.get(), encoder, nullptr), "cannot open the libx264 encoder");
  s.stream = avformat_new_stream(s.out.get(), nullptr);
  if (!s.stream) throw Error(ErrorKind::Io, path + ": cannot add a video stream");
  s.stream->time_base = s.codec->time_base;
  s.stream->avg_frame_rate = rate;
  s.check(avcodec_parameters_from_context(s.stream->codecpar, s.codec.get()), "cannot describe the video stream");
  s.check(avio_open(&s.out->pb, path.c_str(), AVIO_FLAG_WRITE), "cannot create");
  s.open = true;
  s.check(avformat_write_header(s.out.get(), nullptr), "cannot write the MP4 header");
  s.yuv->format = AV_PIX_FMT_YUV420P;
  s.yuv->width = s.codec->width;
  s.yuv->height = s.codec->height;
  s.check(av_frame_get_buffer(s.yuv.get(), 0), "out of memory for a frame");
  s.rgba->format = AV_PIX_FMT_RGBA;
  s.rgba->width = s.codec->width;
  s.rgba->height = s.codec->height;
  s.check(av_frame_get_buffer(s.rgba.get(), 0), "out of memory for a frame");
  s.sws.reset(sws_getContext(s.codec->width, s.codec->height, AV_PIX_FMT_RGBA, s.codec->width, s.codec->height, AV_PIX_FMT_YUV420P,
                             SWS_BICUBIC, nullptr, nullptr, nullptr));
  if (!s.sws) throw Error(ErrorKind::Io, path + ": cannot set up the RGBA to yuv420p conversion");
}

Mp4Writer::~Mp4Writer() = default;

uint32_t Mp4Writer::coded_width() const { return s_->coded_w; }
uint32_t Mp4Writer::coded_height() const { return s_->coded_h; }
uint64_t Mp4Writer::frames() const { return s_->frames; }

void Mp4Writer::add(const RgbaImage& frame) {
  State& s = *s_;
  if (s.finished) throw Error(ErrorKind::InvalidArgument, s.path + ": the MP4 is already finished");
  if (frame.width != s.width || frame.height != s.height)
    throw Error(ErrorKind::InvalidArgument, s.path + ": frame " + std::to_string(s.frames) + " is " + std::to_string(frame.width) + " x " +
                                                std::to_string(frame.height) + ", the movie " + std::to_string(s.width) + " x " +
                                                std::to_string(s.height));
  // Pad to even sides by repeating the last column and row.
  const size_t row = size_t{s.width} * 4;
  for (uint32_t y = 0; y < s.coded_h; ++y) {
    const uint8_t* src = frame.pixels.data() + std::min(y, s.height - 1) * row;
    uint8_t* dst = s.rgba->data[0] + static_cast<ptrdiff_t>(y) * s.rgba->linesize[0];
    std::memcpy(dst, src, row);
    if (s.coded_w != s.width) std::memcpy(dst + row, src + row - 4, 4);
  }
  s.check(av_frame_make_writable(s.yuv.get()), "out of memory for a frame");
  sws_scale(s.sws.get(), s.rgba->data, s.rgba->linesize, 0, static_cast<int>(s.coded_h), s.yuv->data, s.yuv->linesize);
  s.yuv->pts = static_cast<int64_t>(s.frames);
  s.encode(s.yuv.get());
  ++s.frames;
}

void Mp4Writer::finish() {
  State& s = *s_;
  if (s.finished) return;
  s.encode(nullptr);
  s.check(av_write_trailer(s.out.get()), "cannot write the MP4 index");
  s.check(avio_closep(&s.out->pb), "cannot close");
  s.finished = true;
}

}  // namespace tmorph
