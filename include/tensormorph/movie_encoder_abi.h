/* Tensormorph movie encoder module ABI, version 2.
 *
 * Contract
 * --------
 * A movie encoder is a shared library in the plugin directory (libtensormorph-encoder-<format>.so) exporting
 * one C symbol, TM_MOVIE_ENCODER_ENTRY_SYMBOL, with the signature tm_movie_encoder_entry_fn. Core opens it
 * only when a movie of that format is written, so the encoder's libraries (libav for MP4: about a hundred
 * shared objects) cost nothing to a process that writes none. The entry returns a pointer to a static table,
 * or NULL when it cannot speak the version asked for.
 *
 * - open starts a movie of frames of width x height RGBA8 pixels (both even, 2..16384; the caller pads) at `fps`
 *   frames per second (finite, > 0), written through the caller's `sink` (a file or memory: the caller's choice;
 *   the module never opens a file). add takes one frame: width * height * 4 bytes, rows contiguous, alpha
 *   ignored. finish drains the encoder and writes the rest of a complete movie through the sink. destroy frees
 *   the encoder; what an unfinished movie leaves in the sink is the caller's to discard.
 * - The sink's calls are made from open, add and finish only, on the caller's thread; a sink call that fails
 *   (nonzero) makes that call fail with TM_MOVIE_IO (the caller knows the sink's reason).
 * - Every call returns a tm_movie_status; on failure the module writes a message naming the movie (`name`) and
 *   what failed into the caller's buffer (UTF-8, NUL-terminated). No call may abort the process or throw.
 * - One encoder object is used by one thread at a time; distinct objects may be used concurrently.
 */
#ifndef TENSORMORPH_MOVIE_ENCODER_ABI_H
#define TENSORMORPH_MOVIE_ENCODER_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TM_MOVIE_ENCODER_ABI_VERSION 2u
#define TM_MOVIE_ENCODER_ENTRY_SYMBOL "tensormorph_movie_encoder_entry"

typedef enum tm_movie_status {
  TM_MOVIE_OK = 0,
  TM_MOVIE_UNAVAILABLE = 1,     /* the codec this module needs is missing from its libraries */
  TM_MOVIE_IO = 2,              /* the sink failed; the codec or the muxer failed */
  TM_MOVIE_INVALID_ARGUMENT = 3 /* a malformed call (sizes, fps, a call after finish) */
} tm_movie_status;

typedef struct tm_movie_encoder tm_movie_encoder; /* opaque, owned by the module */

/* Where the encoded bytes go (the caller's). */
typedef struct tm_movie_sink {
  void* context;
  /* Writes `size` bytes at the position and advances it (a write after a seek overwrites); 0, or nonzero on failure. */
  int (*write)(void* context, const uint8_t* data, size_t size);
  /* Moves the position to `offset` bytes from the start, at most the bytes written so far; 0, or nonzero. */
  int (*seek)(void* context, uint64_t offset);
} tm_movie_sink;

typedef struct tm_movie_encoder_v1 {
  uint32_t abi_version;    /* TM_MOVIE_ENCODER_ABI_VERSION */
  const char* description; /* for people: the container, codec and library */
  /* `name` names the movie in messages (a path, or what the caller calls the bytes); `sink` outlives the encoder. */
  tm_movie_status (*open)(const char* name, const tm_movie_sink* sink, uint32_t width, uint32_t height, double fps,
                          tm_movie_encoder** out, char* message, size_t message_size);
  tm_movie_status (*add)(tm_movie_encoder* encoder, const uint8_t* rgba, char* message, size_t message_size);
  tm_movie_status (*finish)(tm_movie_encoder* encoder, char* message, size_t message_size);
  void (*destroy)(tm_movie_encoder* encoder);
} tm_movie_encoder_v1;

typedef const tm_movie_encoder_v1* (*tm_movie_encoder_entry_fn)(uint32_t abi_version);

#ifdef __cplusplus
}
#endif

#endif /* TENSORMORPH_MOVIE_ENCODER_ABI_H */
