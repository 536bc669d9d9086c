#pragma once
/*
 * Binary protobuf codec for Connect (application/proto and
 * application/connect+proto): converts between the wire format and the
 * proto3 JSON form handlers use, driven by protobuf-c descriptors.
 */
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct evbuffer;

/* Decodes a message of type desc into proto3 JSON (new reference in *ret). */
int proto_codec_decode(const void *desc, const uint8_t *data, size_t len, json_t **ret);
/* Encodes a proto3 JSON message of type desc, appending the bytes to out. */
int proto_codec_encode(const void *desc, const json_t *msg, struct evbuffer *out);
