#include "io/io_backend.h"
#include "io/io_internal.h"
#include "cache/cache_internal.h"
