/* The public enums of dsspec.h and the modules' own, in one place. */
#include "engine/engine_internal.h"

static const cache_policy_kind policy_kinds[] = {CACHE_POLICY_LRU, CACHE_POLICY_LFU, CACHE_POLICY_ARC};
static const io_backend io_backends[] = {IO_BACKEND_AUTO, IO_BACKEND_URING, IO_BACKEND_PREAD};

const char *dsspec_cache_policy_name(dsspec_cache_policy p) { return cache_policy_name(policy_kinds[p]); }

int dsspec_cache_policy_parse(const char *s, dsspec_cache_policy *out)
{
    cache_policy_kind k;
    if (cache_policy_parse(s, 0, &k)) return -1;
    for (int i = 0; i < 3; i++)
        if (policy_kinds[i] == k) *out = (dsspec_cache_policy)i;
    return 0;
}

int dsspec_io_backend_parse(const char *s, dsspec_io_backend *out)
{
    io_backend b;
    if (io_backend_parse(s, &b)) return -1;
    for (int i = 0; i < 3; i++)
        if (io_backends[i] == b) *out = (dsspec_io_backend)i;
    return 0;
}

cache_policy_kind engine_policy_kind(dsspec_cache_policy p) { return policy_kinds[p]; }
io_backend engine_io_backend(dsspec_io_backend b) { return io_backends[b]; }
