/* Binary protobuf codec: not built yet; only JSON methods are registered (in_desc NULL). */
#include "agent/proto-codec.h"

#include <errno.h>

int proto_codec_decode(const void *desc, const uint8_t *data, size_t len, json_t **ret)
{
    return -EOPNOTSUPP;
}

int proto_codec_encode(const void *desc, const json_t *msg, struct evbuffer *out)
{
    return -EOPNOTSUPP;
}
