/* Tensormorph movie encoder module ABI, version 1.
 *
 * Contract
 * --------
 * A movie encoder is a shared library in the plugin directory (libtensormorph-encoder-<format>.so) exporting
 * one C symbol, TM_MOVIE_ENCODER_ENTRY_SYMBOL, with the signature tm_movie_encoder_entry_fn. Core opens it
 * only when a movie of that format is written, so the encoder's libraries (libav for MP4: about a hundred
 * shared objects) cost nothing to a process that writes none. The entry returns a pointer to a static table,
 * or NULL when it cannot speak the version asked for.
 *
 * - open creates `path` for frames of width x height RGBA8 pixels (both even, 2..16384; the caller pads) at
 *   `fps` frames per second (finite, > 0). add takes one frame: width * height * 4 bytes, rows contiguous,
 *   alpha ignored. finish drains the encoder and closes a complete file. destroy frees the encoder; a file
 *   that was opened but not finished is removed.
 * - Every call returns a tm_movie_status; on failure the module writes a message naming the path and what
 *   failed into the caller's buffer (UTF-8, NUL-terminated). No call may abort the process or throw.
 * - One encoder object is used by one thread at a time; distinct objects may be used concurrently.
 */
#ifndef TENSORMORPH_MOVIE_ENCODER_ABI_H
#define TENSORMORPH_MOVIE_ENCODER_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TM_MOVIE_ENCODER_ABI_VERSION 1u
#define TM_MOVIE_ENCODER_ENTRY_SYMBOL "tensormorph_movie_encoder_entry"

typedef enum tm_movie_status {
  TM_MOVIE_OK = 0,
  TM_MOVIE_UNAVAILABLE = 1,     /* the codec this module needs is missing from its libraries */
  TM_MOVIE_IO = 2,              /* the file cannot be created, written or closed; the codec failed */
  TM_MOVIE_INVALID_ARGUMENT = 3 /* a malformed call (sizes, fps, a call after finish) */
} tm_movie_status;

typedef struct tm_movie_encoder tm_movie_encoder; /* opaque, owned by the module */

typedef struct tm_movie_encoder_v1 {
  uint32_t abi_version;    /* TM_MOVIE_ENCODER_ABI_VERSION */
  const char* description; /* for people: the container, codec and library */
  tm_movie_status (*open)(const char* path, uint32_t width, uint32_t height, double fps, tm_movie_encoder** out,
                          char* message, size_t message_size);
  tm_movie_status (*add)(tm_movie_encoder* encoder, const uint8_t* rgba, char* message, size_t message_size);
  tm_movie_status (*finish)(tm_movie_encoder* encoder, char* message, size_t message_size);
  void (*destroy)(tm_movie_encoder* encoder);
} tm_movie_encoder_v1;

typedef const tm_movie_encoder_v1* (*tm_movie_encoder_entry_fn)(uint32_t abi_version);

#ifdef __cplusplus
}
#endif

#endif /* TENSORMORPH_MOVIE_ENCODER_ABI_H */
