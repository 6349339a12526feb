#include "cache/cache.h"
#include "core/a.h"
