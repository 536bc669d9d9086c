#pragma once
/*
 * Binary protobuf codec for Connect (application/proto and
 * application/connect+proto): converts between the wire format and the
 * proto3 JSON form the handlers use, driven by protobuf-c descriptors
 * generated from the files in proto/. Handlers never see which codec was used.
 *
 * JSON mapping, as protojson: lowerCamelCase names (snake_case accepted),
 * 64-bit integers as strings, enums by name, bytes as base64, maps as
 * objects, oneofs as their one member, google.protobuf.Timestamp as an
 * RFC 3339 string. A field present on the wire is present in the JSON
 * (so an explicit `stdin: false` survives); absent fields stay absent.
 */
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct evbuffer;

/*
 * Decodes a message of type desc (a ProtobufCMessageDescriptor) into JSON.
 * Returns 0 and a new reference, -EINVAL for bytes that are not a valid
 * message (or hold strings that are not UTF-8), -ENOMEM.
 */
int proto_codec_decode(const void *desc, const uint8_t *data, size_t len, json_t **ret);

/*
 * Encodes JSON msg as a message of type desc, appending the bytes to out.
 * Unknown JSON fields are ignored. Returns 0, -EINVAL for a value of the
 * wrong type, -ENOMEM.
 */
int proto_codec_encode(const void *desc, const json_t *msg, struct evbuffer *out);
