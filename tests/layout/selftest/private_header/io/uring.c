#include "io/io_backend.h"
#include "io/io_internal.h"
