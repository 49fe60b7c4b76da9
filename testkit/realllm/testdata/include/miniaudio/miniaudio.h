/*
 * A stand-in for miniaudio.h, used only to build Ollama for the tests (make ollama).
 *
 * The Go module zip of github.com/ollama/ollama leaves out every vendor/ directory,
 * so llama.cpp's vendored miniaudio is missing. Only tools/mtmd/mtmd-helper.cpp
 * includes it, to decode audio input for multimodal models. This header declares
 * the few calls that file makes, and each of them fails: audio input is disabled,
 * text models are unaffected. The other two missing headers come from Debian
 * (nlohmann-json3-dev, libstb-dev).
 */
#ifndef DURABLE_LLM_MINIAUDIO_STUB_H
#define DURABLE_LLM_MINIAUDIO_STUB_H

#include <stddef.h>
#include <stdint.h>

typedef int ma_result;
typedef uint32_t ma_uint32;
typedef uint64_t ma_uint64;

#define MA_SUCCESS 0
#define MA_ERROR (-1)

typedef enum {
    ma_format_unknown = 0,
    ma_format_u8,
    ma_format_s16,
    ma_format_s24,
    ma_format_s32,
    ma_format_f32
} ma_format;

typedef enum {
    ma_encoding_format_unknown = 0,
    ma_encoding_format_wav
} ma_encoding_format;

typedef struct {
    ma_format format;
    ma_uint32 channels;
    ma_uint32 sampleRate;
} ma_decoder_config;

typedef struct {
    int unused;
} ma_decoder;

typedef struct {
    ma_encoding_format encodingFormat;
    ma_format format;
    ma_uint32 channels;
    ma_uint32 sampleRate;
} ma_encoder_config;

typedef struct {
    int unused;
} ma_encoder;

static inline ma_decoder_config ma_decoder_config_init(ma_format format, ma_uint32 channels, ma_uint32 sample_rate) {
    ma_decoder_config c;
    c.format = format;
    c.channels = channels;
    c.sampleRate = sample_rate;
    return c;
}

static inline ma_result ma_decoder_init_memory(const void *data, size_t size, const ma_decoder_config *config, ma_decoder *decoder) {
    (void)data; (void)size; (void)config; (void)decoder;
    return MA_ERROR;
}

static inline ma_result ma_decoder_get_length_in_pcm_frames(ma_decoder *decoder, ma_uint64 *frames) {
    (void)decoder;
    *frames = 0;
    return MA_ERROR;
}

static inline ma_result ma_decoder_read_pcm_frames(ma_decoder *decoder, void *out, ma_uint64 frames, ma_uint64 *read) {
    (void)decoder; (void)out; (void)frames;
    *read = 0;
    return MA_ERROR;
}

static inline ma_result ma_decoder_uninit(ma_decoder *decoder) {
    (void)decoder;
    return MA_SUCCESS;
}

static inline ma_encoder_config ma_encoder_config_init(ma_encoding_format encoding, ma_format format, ma_uint32 channels, ma_uint32 sample_rate) {
    ma_encoder_config c;
    c.encodingFormat = encoding;
    c.format = format;
    c.channels = channels;
    c.sampleRate = sample_rate;
    return c;
}

static inline ma_result ma_encoder_init_file(const char *path, const ma_encoder_config *config, ma_encoder *encoder) {
    (void)path; (void)config; (void)encoder;
    return MA_ERROR;
}

static inline ma_result ma_encoder_write_pcm_frames(ma_encoder *encoder, const void *in, ma_uint64 frames, ma_uint64 *written) {
    (void)encoder; (void)in; (void)frames;
    *written = 0;
    return MA_ERROR;
}

static inline void ma_encoder_uninit(ma_encoder *encoder) {
    (void)encoder;
}

#endif
